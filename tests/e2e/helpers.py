# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the e2e modules share: looking into a simulated Spark, reading a run's results, running a
printed command as a user would, and one-role playbooks. One home for these, so that no test
module imports another.
"""

import contextlib
import json
import os
import re
import shlex
import ssl
import subprocess
import threading
import time

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = "playbooks/deploy-m27.yml"
PROFILE = "minimax-m27-nvfp4"  # what deploy-m27.yml deploys
# deploy.yml's last step alone: recover leaks before a new launch, Ray, engine, smoke
# test, summary. Fault cases of the launch re-run only this step; it needs the profile passed.
LAUNCH = "playbooks/steps/10_launch.yml"
# The known-answer check of every launch (roles/vllm_serve, rule V8) and what the simulation's
# tiny model answers at any TP: the overlay's expectation (a unit test ties it to
# tests/sim/model/make_tiny_model.py's KNOWN_ANSWER), read here rather than written a third time.
KNOWN_ANSWER_TASK = "The engine gives the answer the profile expects"
with open(os.path.join(TOP, "profiles", "overlays", "sim-cpu.yml")) as _overlay:
    TINY_ANSWER = yaml.safe_load(_overlay)["known_answer"]["expect"]
HEAD = "gb10-ray-head"  # gb10_ray_head_container's default
WORKER = "gb10-ray-worker"  # gb10_ray_worker_container's default
MP_HEAD = "gb10-vllm-head"  # gb10_mp_head_container's default (vLLM's own multi-node executor)
MP_WORKER = "gb10-vllm-worker"  # gb10_mp_worker_container's default
# The engine's own port, on the head's loopback: serve.port of profiles/minimax-m27-nvfp4.yml and
# minimax-m3-nvfp4.yml. Clients reach it only through the API gateway (roles/api_gateway, A1).
PORT = 8000
API_PORT = 8443  # gb10_api_port's default: the gateway on the head
ENGINE_STATE = "/var/lib/gb10-engine"  # vllm_serve_state_dir (roles/vllm_serve/vars): pid, launch, log
ENGINE_LOG = ENGINE_STATE + "/engine.log"
# vllm_serve's rescue collects every node's logs (H9), then fails with what failed (roles/vllm_serve).
LOGS_TASK = "Fail with what went wrong and where the logs are"
# Every stop of a serving node goes through these, the engine's first (H4: roles/leak_recovery).
ENGINE_STOP_TASK = "Stop rank 0 on the head, SIGTERM first (a hard kill can leak unified memory, H4)"
RANK_STOP_TASK = "Stop the headless rank on every other node (mp executor), SIGTERM first (H4, X3)"
CONTAINER_STOP_TASK = "Stop serving containers, keeping them for their logs (H4 needs no GPU workload; H9)"
# The simulated driver's ledger (GB10 fixture kit, gb10-gpu-ledger): a LEAK line per allocation
# a container's stop or kill left held.
LEDGER = "/var/log/gb10-gpu-ledger.log"
SUMMARY_TASK = "Show the endpoint"
STATUS_TASK = "Show the status"  # playbooks/status.yml's screen
# playbooks/steps/01_converged.yml: what the deploy does this run.
CONVERGED_TASK = "Say what the run does"
DRIFT = "playbooks/drift.yml"
VERDICT = "Fail every host where a check found drift"


# ---- a simulated Spark from the outside --------------------------------------------------------

WATCHDOG_DATA = "/var/lib/gb10/watchdog"  # watchdog_dir's default
WATCHDOG_CONTAINER = "gb10-watchdog"  # watchdog_container's default
# The watchdog as the e2e cases run it (test_4b, test_4c), sized for the simulation: a probe every 3 s, a hang after 10 s without a token, one failed probe
# is enough, four recoveries per hour (one per case) within the day's six, a pause of 1 s doubling
# between them (the pause's growth and the day's bound are unit-tested: a day of long recoveries);
# the exporters read every 5 s, so a reading after the engine's stop comes soon. The tiny model's
# first token comes within a second; a simulated Spark boots in seconds.
WATCHDOG_SETTINGS = {"gb10_profile": PROFILE, "gb10_watchdog": True, "watchdog_interval_s": 3,
                     "watchdog_deadline_s": 10, "watchdog_failures": 1,
                     "watchdog_max_restarts": 4, "watchdog_window_s": 3600,
                     "watchdog_pause_s": 1,
                     "watchdog_nodes_timeout_s": 180, "node_metrics_interval_s": 5}


def watchdog_state(head):
    return json.loads(on_host(head, "cat", WATCHDOG_DATA + "/state.json"))


def watchdog_log(head):
    return on_host(head, "docker", "logs", WATCHDOG_CONTAINER)


def wait_for(what, check, timeout):
    """check() until it returns something true, at most timeout seconds (bounded loop). A node that
    is booting answers nothing yet: a failed look counts as not yet."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = check()
        except (AssertionError, ValueError, subprocess.TimeoutExpired):
            found = None
        if found:
            return found
        time.sleep(2)
    raise AssertionError("not within %d s: %s" % (timeout, what))


def budget_spent(head, timeout):
    """The watchdog's state once it gave up (its restart budget spent), one read per look."""
    def spent():
        seen = watchdog_state(head)
        return seen if seen["status"] == "out_of_budget" else None
    return wait_for("the budget spent", spent, timeout)


def recovery_since(head, since, what, timeout):
    """The watchdog's last recovery once one that started after `since` ended serving (bounded wait)."""
    def recovered():
        last = watchdog_state(head).get("last_recovery") or {}
        return last.get("started", 0) > since and last.get("result") == "serving" and last

    return wait_for(what, recovered, timeout)


def boot_id(host):
    """The simulated Spark's boot identity: a reboot changes it."""
    return on_host(host, "cat", "/run/gb10-boot-id").strip()


def assert_only_the_leaked_node_rebooted(recovery, node, boots):
    """The watchdog's recovery found the leak on `node` alone, only that node was asked to reboot and
    rebooted (its boot identity changed and no other's; boots: {host: boot_id} before the fault), and
    the engine it started again gave the known answer."""
    assert recovery["memory"][node]["state"] == "leaked", recovery["memory"]
    assert set(recovery["rebooted"]) == {node}, recovery["rebooted"]
    after = {h: boot_id(h) for h in boots}
    assert [h for h in boots if after[h] != boots[h]] == [node], (boots, after)
    assert TINY_ANSWER.strip() in recovery["answer"], recovery


@contextlib.contextmanager
def engine_port_held(head, container):
    """Every start of the engine fails: its port held by a process that closes every connection.
    The watchdog is paused while the engine (rank 0, in the head's serving container `container`)
    stops on SIGTERM and the port is taken, so that it meets the fault whole; started again, it
    runs inside the block (the time it started is what the block gets). The port is freed after."""
    on_host(head, "docker", "stop", WATCHDOG_CONTAINER)
    on_host(head, "docker", "exec", container, "sh", "-c",
            'p=$(cat %s/pid); kill -TERM "$p"; while kill -0 "$p" 2>/dev/null; do sleep 1; done' % ENGINE_STATE)
    squatter = subprocess.Popen(["docker", "exec", head, "python3", "-c",
                                 "import socket, time; s = socket.socket(); "
                                 "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', %d)); "
                                 "s.listen(64); s.settimeout(600)\nwhile True: s.accept()[0].close()" % PORT])
    try:
        time.sleep(1)
        started = time.time()
        on_host(head, "docker", "start", WATCHDOG_CONTAINER)
        yield started
    finally:
        squatter.kill()
        subprocess.run(["docker", "exec", head, "pkill", "-f", "s.bind"], check=False, timeout=30)


def kill_container_init(host, container):
    """End a serving container under its rank, as a crash or the kernel's OOM killer does: its init
    killed on the node (not a `docker kill`, after which Docker would not start it again). The
    simulated driver keeps the rank's unified memory until a reboot (the fixture's ledger, H4).
    Returns when."""
    init = on_host(host, "docker", "inspect", "-f", "{{.State.Pid}}", container).strip()
    on_host(host, "kill", "-KILL", init)
    return time.time()


NETPLAN_FILE = "/etc/netplan/60-gb10-cluster-link.yaml"  # cluster_link_netplan_dir/_file


def on_host(host, *argv):
    """Run a command in a simulated Spark (a container of this machine's Docker); its stdout."""
    proc = subprocess.run(["docker", "exec", host] + list(argv), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
    return proc.stdout


# What a simulated Spark is, as an owner would compare it with a fresh one: its packages and holds,
# every file under /etc, /usr/local, /opt and /root with its type, mode, owner, link target and
# content, what sits at the top of /var/lib, its packet filter's tables, and its containers and
# images. Left out, each for its reason: the host's identity, regenerated at each start
# (hostname, hosts, resolv.conf, ssh host keys), ld.so.cache (rebuilt by every package change,
# the same libraries in another order), Ansible's own remote folders (~/.ansible and
# ~/.ansible_async: Ansible's, made by any run), ssh's known_hosts (ssh appends to it by itself),
# and the GB10 fixture kit's own
# folders (the tests set its hardware state: /opt/gb10-sim, /var/lib/gb10-sim).
NODE_STATE_SCRIPT = r"""
set -e
echo '## packages'; dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\n' | sort
echo '## holds'; apt-mark showhold | sort
echo '## files'
find /etc /usr/local /opt /root -xdev \( -path /etc/hostname -o -path /etc/hosts -o -path /etc/resolv.conf \
  -o -path '/etc/ssh/ssh_host_*' -o -path /etc/ld.so.cache -o -path /root/.ansible -o -path /root/.ssh/known_hosts \
  -o -path /opt/gb10-sim -o -path /root/.cache -o -path /root/.ansible_async \) -prune -o -printf '%p %y %m %u:%g %l\n' | sort
find /etc /usr/local /opt /root -xdev \( -path /etc/hostname -o -path /etc/hosts -o -path /etc/resolv.conf \
  -o -path '/etc/ssh/ssh_host_*' -o -path /etc/ld.so.cache -o -path /root/.ansible -o -path /root/.ssh/known_hosts \
  -o -path /opt/gb10-sim -o -path /root/.cache -o -path /root/.ansible_async \) -prune -o -type f -print0 | sort -z | xargs -0 -r sha256sum
echo '## var-lib'; ls -1 /var/lib | grep -vx gb10-sim
echo '## firewall'; nft list tables | sort
echo '## containers'; docker ps -a --format '{{.Names}} {{.Image}}' | sort
echo '## images'; docker images -q --no-trunc | sort -u
"""


def node_state(host):
    """{section: [lines]} of NODE_STATE_SCRIPT on a simulated Spark."""
    state, section = {}, None
    for line in on_host(host, "sh", "-c", NODE_STATE_SCRIPT).splitlines():
        if line.startswith("## "):
            section = state.setdefault(line[3:], [])
        else:
            section.append(line)
    return state


def state_differences(before, after):
    """{section: {'gone': [...], 'new': [...]}} of the sections that differ."""
    out = {}
    for section in sorted(set(before) | set(after)):
        gone = sorted(set(before.get(section, [])) - set(after.get(section, [])))
        new = sorted(set(after.get(section, [])) - set(before.get(section, [])))
        if gone or new:
            out[section] = {"gone": gone, "new": new}
    return out


def container_id(host, name):
    return on_host(host, "docker", "inspect", "--format", "{{.Id}}", name).strip()


def ray_container_ids(sim_cluster):
    """{host: id} of each node's Ray container (the head's on the head, a worker's elsewhere)."""
    return {h: container_id(h, HEAD if h == sim_cluster.head else WORKER) for h in sim_cluster.hosts}


def ray_containers(hosts, head):
    """{host: (container id, start time)} of each node's Ray container: a restart changes the time."""
    return {h: on_host(h, "docker", "inspect", "--format", "{{.Id}} {{.State.StartedAt}}",
                       HEAD if h == head else WORKER).strip() for h in hosts}


def engine_process(head):
    """(pid, start time in clock ticks, argv) of the engine inside the head container."""
    out = on_host(head, "docker", "exec", HEAD, "sh", "-c",
                  'pid=$(cat /var/lib/gb10-engine/pid); echo "$pid"; cut -d" " -f22 /proc/$pid/stat; '
                  'tr "\\0" "\\n" < /proc/$pid/cmdline')
    lines = out.splitlines()
    return lines[0], lines[1], lines[2:]


def healthy(head, container=HEAD):
    """The engine's /health from inside the head's serving container (no key needed)."""
    out = subprocess.run(["docker", "exec", head, "docker", "exec", container, "python3", "-c",
                          "import urllib.request; print(urllib.request.urlopen("
                          "'http://127.0.0.1:%d/health', timeout=10).status)" % PORT],
                         capture_output=True, text=True, timeout=60, check=False)
    return out.returncode == 0 and out.stdout.strip() == "200"


def leaks(hosts):
    """{host: LEAK lines in its simulated driver's ledger}."""
    return {h: on_host(h, "cat", LEDGER).count("LEAK") for h in hosts}


def worker_running(host):
    out = subprocess.run(["docker", "exec", host, "docker", "inspect", "-f", "{{.State.Running}}", WORKER],
                         capture_output=True, text=True, timeout=60, check=False)
    return out.stdout.strip() == "true"


def serves(sim_cluster):
    """The engine answers /health and every worker's Ray container runs."""
    return healthy(sim_cluster.head) and all(worker_running(h) for h in sim_cluster.hosts[1:])


def api_key(head, client="default"):
    """A client's key as the api_key role keeps it on the controller, named after the head."""
    path = os.path.expanduser("~/.config/gb10-serving/%s%s.api-key" % (head, "" if client == "default" else "." + client))
    with open(path) as f:
        return f.read().strip()


def gateway_ca(head):
    """The cluster CA's certificate on the controller (roles/api_gateway), which the summary names."""
    return os.path.expanduser("~/.config/gb10-serving/%s.gateway-ca.crt" % head)


def api_client(cluster, key=None, timeout=300):
    """The OpenAI client a user points at the summary's endpoint: the gateway over TLS, its
    certificate proven by the cluster's CA."""
    import openai  # the e2e venv's; imported here so that helpers stays importable without it
    head = cluster.head
    return openai.OpenAI(base_url="https://%s:%d/v1" % (cluster.ips[head], API_PORT),
                         api_key=api_key(head) if key is None else key, timeout=timeout, max_retries=0,
                         http_client=openai.DefaultHttpxClient(verify=ssl.create_default_context(cafile=gateway_ca(head))))


def link_state(host, port):
    """(IPv4 addresses with prefix, MTU) of the cluster link port on a simulated Spark."""
    out = on_host(host, "sh", "-c", "ip -o -4 addr show dev %s; cat /sys/class/net/%s/mtu" % (port, port))
    lines = out.splitlines()
    return [line.split()[3] for line in lines[:-1]], int(lines[-1])


# ---- a run's results ---------------------------------------------------------------------------

def assert_succeeded(result, hosts):
    assert result.status == "successful", result
    for host in hosts:
        assert result.stats[host]["failed"] == 0 and result.stats[host]["unreachable"] == 0, result


def ok_results(result, hosts):
    """The per-host module results of an ad-hoc run that must have succeeded on every host."""
    assert_succeeded(result, hosts)
    by_host = result.results_by_host()
    assert sorted(by_host) == sorted(hosts), result
    return by_host


def run_text(result):
    """Everything the run printed, as ansible-runner recorded it with its events."""
    return "".join(ev.get("stdout", "") + "\n" for ev in result.events)


def engine_stops(result, task=ENGINE_STOP_TASK):
    """{item: what the stop said (stopped, killed, none)} of every item that found its container
    running: the head's containers (rank 0's task) or the other nodes (the headless ranks' task).
    Every node runs the stop (roles/vllm_serve/tasks/stop.yml: each waits for the same exit), so
    an item can answer more than once: the one that ended the rank says how (killed over stopped
    over none), whichever host's answer came last."""
    rank = {"none": 0, "stopped": 1, "killed": 2}
    out = {}
    for data in result.host_results(task=task):
        for item in data.get("res", {}).get("results", []):
            if "stdout" in item and rank.get(item["stdout"], 3) >= rank.get(out.get(item["item"]), -1):
                out[item["item"]] = item["stdout"]
    return out


def failure_messages(result, task):
    """{host: message} of a failed task; for a loop, the messages of its failed items, joined."""
    out = {}
    for data in result.host_results(task=task, event="runner_on_failed"):
        res = data.get("res", {})
        items = [item.get("msg", "") for item in res.get("results", []) if item.get("failed")]
        out[data["host"]] = " | ".join(items) if items else res.get("msg", "")
    return out


def printed_playbook_command(message):
    """The argv of the ansible-playbook command a message prints in backticks, split as a shell would."""
    command = re.search(r"`(ansible-playbook [^`]*)`", message)
    assert command, message
    return shlex.split(command.group(1))


def link_figures(line):
    """{host: busbw Gb/s}, the TCP figure and the report path of a link check summary line."""
    busbw = {host: float(gbit) for host, gbit in re.findall(r"(\S+) ([0-9.]+) Gb/s(?:,| all-reduce)", line)}
    tcp = re.search(r"plain TCP to rank 0 between the cluster addresses: ([0-9.]+) Gb/s", line)
    report = re.search(r"Every figure: (\S+\.json)", line)
    return busbw, float(tcp.group(1)) if tcp else None, report.group(1) if report else None


# ---- as a user at the repository root ----------------------------------------------------------

def drift(run_playbook, sim_cluster, **extravars):
    """drift.yml in check mode, as the documented CI job runs it: a "changed" result is a change
    the run would make, not one it made."""
    return run_playbook(DRIFT, sim_cluster.inventory, extravars=dict(gb10_profile="minimax-m27-nvfp4", **extravars),
                        check=True, timeout=900)


def drift_answers(result, task=None):
    """[(host, task, gb10_drift)] of the drift checks that found drift: gb10.serving.drift_check's
    answer (the one drift contract), a changed result, never a failed one."""
    out = []
    for event in result.host_results(task=task, event="runner_on_ok"):
        answer = (event.get("res") or {}).get("gb10_drift")
        if answer and answer.get("drifted"):
            out.append((event.get("host"), event.get("task"), answer))
    return out


def findings(result):
    """{(host, rule)} of the drift checks that found drift; each answers without failing, so the
    host's other checks still run, and drift.yml's verdict play then fails exactly the hosts that
    drifted. Any other failure is returned as (host, task name)."""
    found = {(host, answer["rule"]) for host, unused_task, answer in drift_answers(result)}
    others = {(host, task) for host, task, _msg in result.failures() if task != VERDICT}
    verdict = {host for host, task, _msg in result.failures() if task == VERDICT}
    assert verdict == {host for host, _rule in found} - {host for host, _task in others}, result
    return found | others


def finding_messages(result, task):
    """{host: finding} of one drift check."""
    return {host: answer["finding"] for host, unused_task, answer in drift_answers(result, task)}


def user_env(tmp_path):
    """The environment of a user who ran scripts/setup.sh and activated .venv, at the repo root
    (ansible.cfg there); facts cached in a folder of this test's own."""
    return dict(os.environ, PATH=os.path.join(TOP, ".venv", "bin") + os.pathsep + os.environ.get("PATH", ""),
                ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, ".collections"), ANSIBLE_NOCOLOR="1",
                ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"))


def paste(command, env, timeout=1800):
    """Run a printed command as a user who pasted it into a shell at the repo root."""
    return subprocess.run(shlex.split(command), cwd=TOP, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


# ---- one role alone, and faults at a known step -------------------------------------------------

def role_playbook(tmp_path, role, **role_vars):
    """A playbook of one role of the collection on the whole cluster, as deploy.yml's play runs it
    (any_errors_fatal)."""
    path = tmp_path / ("%s.yml" % role)
    path.write_text(yaml.safe_dump([{
        "name": "Run %s" % role, "hosts": "gb10_cluster", "any_errors_fatal": True, "become": True,
        "gather_facts": False, "roles": [{"role": "gb10.serving." + role, "vars": role_vars}]}]))
    return str(path)


def when_task_starts(task, host, action):
    """An event handler that runs action() once, in a thread, when task starts on host."""
    fired = threading.Event()

    def handler(event):
        data = event.get("event_data", {})
        if (event.get("event") == "runner_on_start" and data.get("task") == task
                and data.get("host") == host and not fired.is_set()):
            fired.set()
            threading.Thread(target=action, daemon=True).start()
    handler.fired = fired
    return handler
