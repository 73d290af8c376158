# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""End-to-end harness: the simulated Spark cluster (tests/sim/) and Ansible runs through
ansible-runner, read back as events and per-host stats (never scraped stdout).

Fixtures
  sim_cluster   (module scope) a fresh 2-host cluster, inventory/sim.ini  -> SimCluster
  sim_cluster3  (module scope) the 3-host cluster, inventory/sim3.ini -> SimCluster
  serving       the 2-host cluster serving: as the module before left it, or deployed now when its
                engine does not answer or a worker's Ray container is down -> SimCluster
  run_playbook  run_playbook(playbook, inventory, extravars=None, limit=None, check=False,
                event_handler=None) -> RunResult (status, rc, stats per host, events);
                event_handler(event) is called for each event as the run goes (fault injection)
  run_adhoc     run_adhoc(module, args, inventory, pattern="gb10_cluster") -> RunResult

The cluster is made fresh (host containers recreated, their engines emptied) the first time in
the session that a module asks for it; when a later module asks for another size, hosts are added
(fresh) or removed and the others are left as they are, but for a change of cabling: the 3-host
cluster is a mesh, the 2-host one a pair, so each host is made again on the way to 3 hosts. The volumes that cache the serving image
in each host's engine are kept. At the end of the session the host containers are removed
(GB10_SIM_KEEP=1 leaves them up to look at, GB10_SIM_REUSE=1 starts the next session from them;
`scripts/sim.sh down` removes everything).
"""

import importlib.util
import itertools
import json
import os
import sys
import time

import ansible_runner
import pytest

from .helpers import PLAYBOOK, assert_succeeded, node_state, serves

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTPUT = os.path.join(TOP, "tests", "output", "e2e")

_spec = importlib.util.spec_from_file_location("gb10_sim_cluster", os.path.join(TOP, "tests", "sim", "cluster.py"))
sim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sim)

# Every host of the last fresh cluster as it came (helpers.node_state), for the reset's comparison.
FRESH_NODES = os.path.join(sim.SIM_DIR, "fresh-nodes.json")

_run_ids = itertools.count(1)
# One folder per session: runner artifacts (events, stdout for a human) and a fact cache of its
# own, since facts cached by earlier runs would describe hosts that no longer exist.
_SESSION = os.path.join(OUTPUT, time.strftime("%Y%m%d-%H%M%S-") + str(os.getpid()))
_FACT_CACHE = os.path.join(_SESSION, "facts")


class RunResult:
    """What one ansible-runner run gave: status ("successful", "failed", "timeout"...), rc,
    stats[host] = {ok, changed, failed, unreachable, skipped, rescued, ignored}, and events."""

    STAT_KEYS = {"ok": "ok", "changed": "changed", "failures": "failed", "dark": "unreachable",
                 "skipped": "skipped", "rescued": "rescued", "ignored": "ignored"}

    def __init__(self, runner, artifact_dir):
        self.status = runner.status
        self.rc = runner.rc
        self.events = list(runner.events)
        self.artifact_dir = artifact_dir
        raw = runner.stats or {}
        hosts = set(itertools.chain.from_iterable(raw.get(k, {}) for k in self.STAT_KEYS))
        self.stats = {h: {name: raw.get(key, {}).get(h, 0) for key, name in self.STAT_KEYS.items()}
                      for h in hosts}

    def host_results(self, task=None, host=None, event="runner_on_ok"):
        """event_data of task results: filter by task name, host and event type."""
        out = []
        for ev in self.events:
            data = ev.get("event_data", {})
            if ev.get("event") != event:
                continue
            if task is not None and data.get("task") != task:
                continue
            if host is not None and data.get("host") != host:
                continue
            out.append(data)
        return out

    def results_by_host(self, task=None, event="runner_on_ok"):
        """{host: module result (res)} of one task (or of the ad-hoc module)."""
        return {d["host"]: d.get("res", {}) for d in self.host_results(task=task, event=event)}

    def failures(self):
        """[(host, task, message)] of failed and unreachable results."""
        out = []
        for event in ("runner_on_failed", "runner_on_unreachable"):
            for d in self.host_results(event=event):
                if d.get("ignore_errors"):
                    continue
                res = d.get("res", {})
                out.append((d.get("host"), d.get("task"), res.get("msg") or res.get("stderr") or res))
        return out

    def __repr__(self):
        return "RunResult(status=%r, rc=%r, stats=%r, failures=%r, artifacts=%r)" % (
            self.status, self.rc, self.stats, self.failures(), self.artifact_dir)


def _runner_env():
    return {
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(TOP, ".collections"),
        "ANSIBLE_CONFIG": os.path.join(TOP, "ansible.cfg"),
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": _FACT_CACHE,
        "ANSIBLE_NOCOLOR": "1",
        # ansible-playbook of this venv, whatever PATH pytest was started with.
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }


def _abs(path):
    return path if os.path.isabs(path) else os.path.join(TOP, path)


def _run(name, timeout, envvars=None, **kwargs):
    ident = "%03d-%s" % (next(_run_ids), name)
    # One private data dir per run: ansible-runner keeps a run's cmdline (--check) in
    # <private>/env/cmdline, and a shared dir would carry it into every later run.
    private = os.path.join(_SESSION, "runner", ident)
    os.makedirs(private, exist_ok=True)
    runner = ansible_runner.run(
        private_data_dir=private, ident=ident, project_dir=TOP, envvars=dict(_runner_env(), **(envvars or {})),
        quiet=True, timeout=timeout, **kwargs)
    return RunResult(runner, os.path.join(private, "artifacts", ident))


@pytest.fixture(scope="session")
def run_playbook():
    """run_playbook(playbook, inventory, extravars=None, limit=None, check=False, timeout=3600,
    event_handler=None, diff=False, envvars=None)."""
    def _run_playbook(playbook, inventory, extravars=None, limit=None, check=False, timeout=3600,
                      event_handler=None, diff=False, envvars=None):
        kwargs = {"playbook": _abs(playbook), "inventory": _abs(inventory), "timeout": timeout, "envvars": envvars}
        if event_handler:
            # ansible-runner calls it with each event while the run goes on; it must return True
            # for the event to be kept.
            kwargs["event_handler"] = lambda event: event_handler(event) or True
        if extravars:
            kwargs["extravars"] = extravars
        if limit:
            kwargs["limit"] = limit
        flags = (["--check"] if check else []) + (["--diff"] if diff else [])
        if flags:
            kwargs["cmdline"] = " ".join(flags)
        return _run(os.path.splitext(os.path.basename(playbook))[0], **kwargs)
    return _run_playbook


@pytest.fixture(scope="session")
def run_adhoc():
    """run_adhoc(module, args, inventory, pattern="gb10_cluster", timeout=300): one module on hosts."""
    def _run_adhoc(module, args, inventory, pattern="gb10_cluster", timeout=300):
        return _run(module.split(".")[-1], timeout=timeout, module=module, module_args=args,
                    host_pattern=pattern, inventory=_abs(inventory))
    return _run_adhoc


class SimCluster:
    """The cluster a test got: hosts (head first), their addresses, its inventory, the images."""

    def __init__(self, state):
        self.state = state
        self.hosts = [h["name"] for h in state["hosts"]]
        # Management addresses (SSH, API clients) and cluster link addresses (gb10_cluster_ip).
        self.ips = {h["name"]: h["ip"] for h in state["hosts"]}
        self.cluster_ips = {h["name"]: h["cluster_ip"] for h in state["hosts"]}
        self.link_port = state["link_port"]
        # The cable's second half (cluster_link's pair mode): its port and each host's address on it.
        self.twin_port = state["twin_port"]
        self.twin_ips = {h["name"]: h["twin_ip"] for h in state["hosts"]}
        # Every link port of each host with the address the inventory gives it (the mesh's four).
        self.links = {h["name"]: h.get("links", []) for h in state["hosts"]}
        self.head = self.hosts[0]
        self.inventory = state["inventory"]
        self.image_name = state["image_name"]
        self.serving_image = state["serving_image"]
        self.model_path = state["model_path"]


class _Manager:
    def __init__(self):
        self.cluster = sim.Cluster()
        self.size = None
        self.state = None

    def ensure(self, count, fresh=False):
        """The cluster with count hosts: made fresh the first time (or when asked); a change of
        size after that adds or removes hosts and leaves the others as they are."""
        if fresh or self.size is None or self.size != count:
            t0 = time.monotonic()
            # GB10_SIM_REUSE=1 takes the hosts as an earlier session left them (GB10_SIM_KEEP=1),
            # to re-run one module while working on it; CI always starts fresh.
            fresh = fresh or (self.size is None and os.environ.get("GB10_SIM_REUSE") != "1")
            self.state = self.cluster.up(count, fresh=fresh)
            self.size = count
            if fresh:
                # Each host as it came, before any playbook ran: what reset.yml must give back
                # (test_4d_reset.py). Kept beside the cluster's state for GB10_SIM_REUSE sessions.
                with open(FRESH_NODES, "w") as f:
                    json.dump(dict((h["name"], node_state(h["name"])) for h in self.state["hosts"]), f)
            sys.stderr.write("e2e: %s %d-host simulated cluster in %.0f s\n"
                             % ("fresh" if fresh else "resized", count, time.monotonic() - t0))
        return SimCluster(self.state)

    def finish(self):
        if self.size is not None and os.environ.get("GB10_SIM_KEEP") != "1":
            self.cluster.down(keep_cache=True)


@pytest.fixture(scope="session")
def sim_manager():
    manager = _Manager()
    yield manager
    manager.finish()


@pytest.fixture(scope="module")
def sim_cluster(sim_manager):
    """The simulated 2-Spark cluster (inventory/sim.ini), fresh the first time it is asked for."""
    return sim_manager.ensure(2)


@pytest.fixture(scope="module")
def sim_cluster3(sim_manager):
    """The simulated 3-Spark cluster (inventory/sim3.ini), for TP=3: a mesh, so the hosts the modules
    before used are made again with its cabling, the third one added (tests/sim/cluster.py)."""
    return sim_manager.ensure(3)


@pytest.fixture
def serving(sim_cluster, run_playbook):
    """The 2-Spark cluster serving, for every test that needs it: one deploy-m27.yml run when the
    engine does not answer or a worker's Ray container is down (a module before broke it on
    purpose), none when it serves already."""
    if not serves(sim_cluster):
        assert_succeeded(run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=3000), sim_cluster.hosts)
        assert serves(sim_cluster)
    return sim_cluster
