# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection as a user installs it, and the re-run that must change nothing (O2):
the tarball `ansible-galaxy collection build` makes from the checkout, installed into a fresh
collections path, and `ansible-playbook gb10.serving.deploy_m27 -i inventory/sim.ini` (the
inventory's sim-cpu overlay) run from a folder outside the checkout, with a user's own ansible.cfg
and nothing of the checkout on the collections path, right after the checkout's first deploy
(test_2_deploy.py). The run follows a hand edit of a file the deploy writes on one node (a line added to the worker's
env file): that node no longer matches its stamp, so every step runs (01_converged.yml names the file),
every role's tasks meet the serving cluster again, and the run comes to the same result: every
play runs from the installed copy, nothing fails, the one change is the file written back, the
link is not measured again under the serving engine, the same Ray containers and the same engine
process, and the run writes nothing inside the installed collection. One run is all three checks
(the installed-collection run doubles as the idempotence check and as the
hand-edit case).

Then the re-run a user gets next: the cluster is as that full run left it, so the
deploy skips every step up to the kept engine's smoke test (01_converged.yml); no role but the API
key, the gateway's endpoint and the engine's runs, nothing changes, the same engine still answers.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from .helpers import (CONVERGED_TASK, PLAYBOOK, SUMMARY_TASK, TOP, assert_succeeded, engine_process, healthy, on_host,
                      ray_container_ids)

BIN = os.path.dirname(sys.executable)
ENV_FILE = "/etc/gb10/nccl.env"  # nccl_env_path
# The tarball as tests/publish builds it (a copy of the files git tracks, then
# `ansible-galaxy collection build`).
_spec = importlib.util.spec_from_file_location("gb10_publish_collection", os.path.join(TOP, "tests", "publish", "collection.py"))
publish = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(publish)
# What a user writes in their own ansible.cfg (no fact cache, no checkout paths); host keys are
# checked as Ansible's default has it, and the simulated inventory opts out of that on its own.
USER_CFG = """[defaults]
forks = 16
retry_files_enabled = False
interpreter_python = auto_silent
callbacks_enabled = gb10.serving.drift_report, gb10.serving.next_step
stdout_callback = ansible.posix.json

[ssh_connection]
pipelining = True
ssh_args = -o ControlMaster=auto -o ControlPersist=120s
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(collections path, installed collection's folder) of the built tarball."""
    base = tmp_path_factory.mktemp("installed")
    tarball = publish.build(str(base / "build"))
    collections = base / "collections"
    # --no-deps: community.docker, ansible.posix and community.general come with the PyPI
    # `ansible` package (Galaxy is not reachable here); --force: the checkout's link on the
    # configured paths is no reason to skip.
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--force", "--no-deps", "-p",
                    str(collections), tarball], check=True, capture_output=True, timeout=300)
    path = collections / "ansible_collections" / "gb10" / "serving"
    assert (path / "MANIFEST.json").is_file()
    return collections, path


def files_under(path):
    return sorted(os.path.relpath(os.path.join(d, f), str(path)) for d, _dirs, fs in os.walk(str(path)) for f in fs
                  if "__pycache__" not in d)


@pytest.mark.rule("H10", "O2")
def test_the_installed_collection_writes_back_a_hand_edit_and_changes_nothing_else(serving, installed, tmp_path):
    sim_cluster = serving
    worker = sim_cluster.hosts[1]
    collections, path = installed
    before_files = files_under(path)
    ray_before = ray_container_ids(sim_cluster)
    engine_before = engine_process(sim_cluster.head)
    work = tmp_path / "work"
    work.mkdir()
    (work / "ansible.cfg").write_text(USER_CFG)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(work / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(collections),
               ANSIBLE_NOCOLOR="1", PATH=BIN + os.pathsep + env.get("PATH", ""))

    original = on_host(worker, "cat", ENV_FILE)
    on_host(worker, "sh", "-c", "echo NCCL_DEBUG=TRACE >> " + ENV_FILE)
    try:
        proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "gb10.serving.deploy_m27",
                               "-i", os.path.join(TOP, sim_cluster.inventory)],
                              cwd=str(work), env=env, capture_output=True, text=True, timeout=1800, check=False)
    finally:
        subprocess.run(["docker", "exec", "-i", worker, "sh", "-c", "cat > " + ENV_FILE],
                       input=original, text=True, check=True, timeout=60)

    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    # The json callback's document; raw_decode leaves whatever a callback printed after it.
    run = json.JSONDecoder().raw_decode(proc.stdout, proc.stdout.index("{"))[0]
    stats = run["stats"]
    for host in sim_cluster.hosts:
        assert stats[host]["failures"] == 0 and stats[host]["unreachable"] == 0, stats
    said = next(t["hosts"][sim_cluster.head]["msg"] for p in run["plays"] for t in p["tasks"]
                if t["task"]["name"] == CONVERGED_TASK)
    assert said == "Every step runs: %s: files %s: changed." % (worker, ENV_FILE), said
    # Host prep wrote the file back (the only change); the engine kept serving through it (O2).
    changed = [(host, t["task"]["name"]) for p in run["plays"] for t in p["tasks"]
               for host, res in t["hosts"].items() if res.get("changed")]
    assert {h: stats[h]["changed"] for h in sim_cluster.hosts} == {sim_cluster.head: 0, worker: 1}, changed
    assert on_host(worker, "cat", ENV_FILE) == original
    # Every play and task came from the installed copy, none from the checkout.
    paths = [p["play"]["path"] for p in run["plays"]] + [t["task"]["path"] for p in run["plays"] for t in p["tasks"]]
    assert paths and all(p.startswith(str(path)) for p in paths if p), [p for p in paths if not p.startswith(str(path))][:5]
    # Every step ran: host prep's and Ray's roles among them.
    roles = {t["task"]["path"].split("/roles/")[1].split("/")[0] for p in run["plays"] for t in p["tasks"]
             if "/roles/" in t["task"]["path"]}
    assert {"nvidia_driver", "serving_containers", "node_metrics"} <= roles, roles
    # The serving engine holds the link: it is not measured again, and the summary says so; the
    # kept engine still answered its (short) smoke request.
    summary = " ".join(next(t["hosts"][sim_cluster.head]["msg"] for p in run["plays"] for t in p["tasks"]
                            if t["task"]["name"] == SUMMARY_TASK))
    assert "Link check (N5): not measured: the engine keeps running" in summary, summary
    assert "engine kept running" in summary and "(kept engine: a short request" in summary, summary
    # The same containers and the very same engine process, not a restart (same pid and start time).
    assert ray_container_ids(sim_cluster) == ray_before
    assert engine_process(sim_cluster.head)[:2] == engine_before[:2]
    assert healthy(sim_cluster.head)
    # Nothing written inside the installed collection (logs, reports, caches).
    assert files_under(path) == before_files


@pytest.mark.rule("O2")
def test_a_rerun_on_the_converged_cluster_skips_to_the_smoke_test(serving, run_playbook):
    # Right after the full run above (the checkout and the installed copy are the same content, so
    # the same inputs; the edited file is written back and stamped): every node reads as it was stamped and the engine serves this launch.
    sim_cluster = serving
    ray_before = ray_container_ids(sim_cluster)
    engine_before = engine_process(sim_cluster.head)

    result = run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=1800)

    assert_succeeded(result, sim_cluster.hosts)
    assert {h: result.stats[h]["changed"] for h in sim_cluster.hosts} == {h: 0 for h in sim_cluster.hosts}
    said = result.results_by_host(task=CONVERGED_TASK)[sim_cluster.head]["msg"]
    assert said.startswith("Converged: every node is as the last full deploy left it"), said
    # No role that prepares, links, copies or starts anything ran a task; the engine's smoke test did.
    # The API gateway's role only says where clients reach it (its endpoint facts, for the summary), the
    # firewall's what its table lets in (A4); the cluster role only defines and reads: its argument check
    # and the run's context (the converged read and the client keys are the steps' own task files);
    # the serving containers' role only refuses a setting under its old name (a converged run too).
    roles = {e["event_data"].get("role") for e in result.events if e.get("event") == "runner_on_start"}
    assert roles - {None} == {"cluster", "api_key", "api_gateway", "vllm_serve", "firewall", "serving_containers"}, roles
    containers_tasks = {e["event_data"].get("task") for e in result.events
                        if e.get("event") == "runner_on_start" and e["event_data"].get("role") == "serving_containers"
                        and not e["event_data"].get("task", "").startswith("Validating arguments against arg spec")}
    assert containers_tasks == {"Refuse settings under the role's old name (ray_cluster_*)"}, containers_tasks
    firewall_tasks = {e["event_data"].get("task") for e in result.events
                      if e.get("event") == "runner_on_start" and e["event_data"].get("role") == "firewall"
                      and not e["event_data"].get("task", "").startswith("Validating arguments against arg spec")}
    assert firewall_tasks == {"Say what the packet filter lets in (A4)"}, firewall_tasks
    cluster_tasks = {e["event_data"].get("task") for e in result.events
                     if e.get("event") == "runner_on_start" and e["event_data"].get("role") == "cluster"
                     and not e["event_data"].get("task", "").startswith("Validating arguments against arg spec")}
    assert cluster_tasks <= {"Require a profile", "Resolve the launch once, with this inventory's overlay (M1)",
                             "Read the launch that served last on the head (no gb10_profile given)",
                             "Take that launch for the run", "Refuse a launch recorded on other nodes",
                             "Resolve the launch's profile (M1)", "What the API gateway fronts",
                             "What the run keeps"}, cluster_tasks
    gateway_tasks = {e["event_data"].get("task") for e in result.events
                     if e.get("event") == "runner_on_start" and e["event_data"].get("role") == "api_gateway"
                     and not e["event_data"].get("task", "").startswith("Validating arguments against arg spec")}
    assert gateway_tasks == {"Where clients reach the gateway"}, gateway_tasks
    summary = " ".join(result.results_by_host(task=SUMMARY_TASK)[sim_cluster.head]["msg"])
    assert "engine kept running" in summary and "Smoke test (V8) answered:" in summary, summary
    assert "Metrics (O6): http://%s:9100/metrics" % sim_cluster.ips[sim_cluster.head] in summary, summary
    assert ray_container_ids(sim_cluster) == ray_before
    assert engine_process(sim_cluster.head)[:2] == engine_before[:2]
    assert healthy(sim_cluster.head)
