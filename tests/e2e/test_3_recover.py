# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Ray worker lost under the serving engine (rules N5, R2, O1, H4) on the simulated 2-Spark
cluster:
- the worker's Ray container ends under its rank: in the default run as a crash or the OOM killer
  ends it (its init killed; the watchdog is off here, so nothing starts it again); in `scripts/test.sh
  full` the way it goes on a Spark whose cluster link loses its addresses: the worker's cluster
  port loses its address, and the head's second twin its own (half the link gone, which NCCL would
  not say); Ray's GCS declares the node dead after its health checks, and when the worker's address
  is back its raylet learns it was declared dead and exits, its container ending under its rank
  (Ray's own behaviour); drift.yml names N5 on the head (its twin still without its address), R2 on
  the worker (its Ray container stopped) and R5 on the head (Ray shows one node);
- the container's end leaves the worker's rank's unified memory held by the driver: nobody plants
  it, the simulated Spark's driver keeps it because the container died under the rank (the fixture
  kit's gb10-gpu-ledger, tests/fixtures/gb10-sim/README.md);
- the deploy a user runs next is refused by preflight, before anything changes, naming the leaked
  node and the command that frees it, which is the recover.yml run that follows;
- playbooks/recover.yml finds that leak, reboots that host only (its boot id changes, the head's
  does not) and frees it. The head's engine is still there when recover.yml starts, and it stops
  it before Ray and the containers (H4), so the head leaks nothing: stopping the head's container
  first would leak the head too, and reboot it;
- recover.yml ends saying the cluster does not serve, with the launch step of the profile that
  served; that command, pasted as printed (playbooks/steps/10_launch.yml, deploy.yml's last step
  alone), brings the cluster back and it answers a chat request again: a reboot keeps what the
  steps before it configured (the link's netplan file, the env file, the image), so only Ray and
  the engine are missing (a fault test re-runs only the step it needs);
- in `scripts/test.sh full` (marker `full`): the DGX OS modprobe override back on the serving
  worker (H2), named by drift, fixed by the deploy that drift names for it: the worker reboots
  only after the engine on the head stopped (H4), and the cluster serves again.
The tests run in this order, each on the state the one before left.
"""

import os
import re
import shlex
import subprocess
import time

import pytest

from .helpers import (CONTAINER_STOP_TASK, CONVERGED_TASK, ENGINE_STOP_TASK, HEAD, LAUNCH, PLAYBOOK, PROFILE, TOP, WORKER,
                      api_client, assert_succeeded, boot_id, drift, failure_messages, finding_messages, findings,
                      healthy, kill_container_init, leaks, link_state, on_host, paste, user_env, worker_running)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H4", "O1", "O3")

PREFLIGHT_TASK = "Refuse before anything changes"  # roles/preflight
NEXT_LAUNCH_TASK = "Say that the cluster does not serve now, and the command that serves it again"  # vllm_serve

RECOVER = "playbooks/recover.yml"


def readings(result, host):
    """Every gb10.serving.unified_memory reading the run made on host, in order."""
    found = [d["res"] for d in result.host_results(host=host) if d.get("task_action") == "gb10.serving.unified_memory"]
    assert found, result
    return found


# Ray's GCS declares a node dead after health_check_failure_threshold (5) failed checks, one every
# health_check_period_ms (3 s), each allowed health_check_timeout_ms (10 s): about a minute.
RAY_NODE_DEATH_BOUND_S = 180


def ray_nodes_alive(head):
    """Nodes `ray status` in the head's Ray container lists as active (what drift's R5 reads)."""
    out = subprocess.run(["docker", "exec", head, "docker", "exec", HEAD, "ray", "status"],
                         capture_output=True, text=True, timeout=120, check=False).stdout
    return len(re.findall(r"(?m)^ 1 node_", out))


def wait_for(what, predicate, bound_s):
    deadline = time.monotonic() + bound_s
    while not predicate():
        assert time.monotonic() < deadline, "%s: not within %d s" % (what, bound_s)
        time.sleep(5)


# `full` (the test budget): the default run ends the worker's container by a crash, in the next case.
@pytest.mark.rule("N5", "O3")
@pytest.mark.full
def test_a_link_that_loses_its_addresses_loses_the_worker_and_drift_names_both(serving, run_playbook):
    # The worker's cluster port loses its address, and the head's second twin its own (
    # half the link gone, which NCCL would not say). Ray's GCS reaches the worker's raylet over
    # the link: its health checks fail and it declares the worker dead (Ray's own behaviour;
    # nothing here kills anything). When the worker's address is back, its raylet learns it was
    # declared dead and exits, and its container ends under its rank: the leak recover.yml then
    # finds. Drift, with the head's twin still without its address, names N5 there with what is
    # missing, R2 on the worker (its Ray container stopped) and R5 on the head (Ray shows one
    # node), and changes nothing.
    sim_cluster = serving
    head, worker = sim_cluster.hosts
    worker_link = (worker, sim_cluster.link_port, sim_cluster.cluster_ips[worker])
    head_twin = (head, sim_cluster.twin_port, sim_cluster.twin_ips[head])
    for host, port, address in (worker_link, head_twin):
        on_host(host, "ip", "addr", "del", "%s/24" % address, "dev", port)
    removed = [worker_link, head_twin]
    try:
        wait_for("Ray's GCS declaring the worker dead", lambda: ray_nodes_alive(head) == 1, RAY_NODE_DEATH_BOUND_S)
        restore(worker_link)
        removed.remove(worker_link)
        wait_for("the worker's Ray container ending", lambda: not worker_running(worker), RAY_NODE_DEATH_BOUND_S)

        result = drift(run_playbook, sim_cluster)

        assert result.status == "failed", result
        found = findings(result)
        assert {(worker, "R2"), (head, "R5"), (head, "N5")} <= found, result
        host, port, address = head_twin
        message = finding_messages(result, "Cluster link - address, MTU and netplan file as deployed (N5)")[host]
        assert port in message and address in message, message
        assert link_state(host, port)[0] == []  # check mode put nothing back
        assert not worker_running(worker)
    finally:
        for lost in removed:
            restore(lost)


def restore(lost):
    host, port, address = lost
    subprocess.run(["docker", "exec", host, "ip", "addr", "add", "%s/24" % address, "dev", port],
                   capture_output=True, timeout=60, check=False)


@pytest.mark.rule("H4")
def test_the_workers_container_ended_under_its_rank_leaves_its_memory_held(sim_cluster, request):
    # In the default run the worker's Ray container ends as a crash or the OOM killer ends it (its init
    # killed, the watchdog off: nothing starts it again); in `full` the link case above ended it the
    # way Ray does. Either way nobody plants the leak: the simulated driver keeps the rank's memory
    # because the container died under it (the fixture kit's ledger, H4), as a Spark's does.
    head, worker = sim_cluster.hosts
    before = leaks([worker])[worker]
    ended = subprocess.run(["docker", "exec", worker, "docker", "inspect", "-f", "{{.State.Status}}", WORKER],
                           capture_output=True, text=True, timeout=60, check=False).stdout.strip() == "exited"
    if not ended:
        request.getfixturevalue("serving")  # a serving cluster first (a no-op after the cases before)
        assert healthy(head) and worker_running(worker)
        kill_container_init(worker, WORKER)
        wait_for("the worker's Ray container ending", lambda: not worker_running(worker), 120)
        wait_for("the simulated driver keeping the rank's memory", lambda: leaks([worker])[worker] == before + 1, 60)
    assert leaks([worker])[worker] >= 1


@pytest.mark.rule("H4")
def test_a_deploy_onto_the_leaked_node_names_the_leak_and_the_command_that_frees_it(sim_cluster, run_playbook):
    # The deploy a user runs next stops at preflight, before anything changes; it names
    # the leaked node and the one command that frees it, not three guesses (the fit holds on the
    # memory the reboot gives back). That command, as printed, is the next test's recover.yml run.
    head, worker = sim_cluster.hosts

    refused = run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=1500)

    assert refused.status == "failed", refused
    message = failure_messages(refused, PREFLIGHT_TASK)[head]
    assert "host %s: unified memory leaked (H4: %s " % (worker, worker) in message, message
    assert "after the reboot it fits" in message and "page cache (H3)" not in message, message
    argv = shlex.split(re.search(r"Fix: (ansible-playbook .*?) reboots only the leaked nodes", message).group(1))
    assert argv[0] == "ansible-playbook" and argv[2] == "-i", argv
    assert os.path.samefile(argv[1], os.path.join(TOP, RECOVER)), argv
    assert os.path.samefile(argv[3], os.path.join(TOP, sim_cluster.inventory)), argv


@pytest.mark.rule("H10")
def test_recover_reboots_only_the_host_the_kill_leaked_then_the_cluster_serves_again(sim_cluster, run_playbook, tmp_path):
    head, worker = sim_cluster.hosts
    boots = {h: boot_id(h) for h in sim_cluster.hosts}
    # The head keeps 20 GiB of page cache that no drop frees (files its running services map): on a
    # GB10 CUDA's free figure is MemFree, so MemAvailable - CUDA free is then ~20 GiB, which a verdict
    # on that gap takes for a leak and reboots a healthy node for. Cache is not a leak: healthy.
    # It also holds 11 GiB a process pinned with mlock (the engine's containers run with IPC_LOCK):
    # in neither AnonPages nor Shmem, yet a process's, never a leak (H4). 11 GiB: over the leak
    # threshold, so a verdict that took locked pages for unaccounted memory would reboot the head,
    # and within the nodes' balance after the worker's reboot (H5: more would rightly refuse).
    on_host(head, "gb10-sim-set", "cache_floor_gib=20", "cache_gib=20", "locked_gib=11")

    recovered = run_playbook(RECOVER, sim_cluster.inventory, timeout=1500)

    assert_succeeded(recovered, sim_cluster.hosts)
    # The leak is the kill's, measured after the engine, Ray and the containers were stopped.
    assert readings(recovered, worker)[0]["leaked"], readings(recovered, worker)
    head_reading = readings(recovered, head)[0]
    assert not head_reading["leaked"], head_reading
    assert head_reading["available_gib"] - head_reading["cuda_free_gib"] > head_reading["leak_threshold_gib"]
    assert head_reading["locked_gib"] >= 11 > head_reading["leak_threshold_gib"] > head_reading["unaccounted_gib"], head_reading
    # The first deploy's clean reading recorded each node's baseline; the worker's reboot replaced its own.
    assert head_reading["healthy_offset_source"] == "baseline", head_reading
    assert readings(recovered, worker)[-1]["baseline_recorded"], readings(recovered, worker)
    rebooted = {d["host"] for d in recovered.host_results(task="Reboot the leaked node")}
    assert rebooted == {worker}, recovered
    assert boot_id(worker) != boots[worker]
    assert boot_id(head) == boots[head]  # a healthy node is never rebooted
    # The OOM guard the deploy enabled came back with the node's boot (H10).
    assert on_host(worker, "pgrep", "-x", "earlyoom").strip()
    assert readings(recovered, worker)[-1]["unaccounted_gib"] < 2, readings(recovered, worker)
    # The process that pinned the head's pages ends (what it holds would not leave room for the
    # launch at its utilization, which preflight would rightly refuse).
    on_host(head, "gb10-sim-set", "locked_gib=0")

    # recover.yml starts no engine: it says so, and prints the launch step of the profile that
    # served. Pasted as printed, it brings the cluster back.
    said = recovered.results_by_host(task=NEXT_LAUNCH_TASK)[head]["msg"]
    assert "The cluster does not serve now" in said and "(%s): " % PROFILE in said, said
    command = said.split("(%s): " % PROFILE, 1)[1]
    argv = shlex.split(command)
    assert os.path.samefile(argv[1], os.path.join(TOP, LAUNCH)), argv
    # The launch that served, with the variables that selected it beside the profile (here the
    # simulated inventory's overlay; an executor or a site's recipes chosen with -e the same way).
    assert argv[argv.index("gb10_profile=" + PROFILE) - 1] == "-e", argv
    assert argv[argv.index("gb10_profile_overlay=sim-cpu") - 1] == "-e", argv
    deployed = paste(command, user_env(tmp_path), timeout=3000)

    assert deployed.returncode == 0, deployed.stdout[-4000:]
    client = api_client(sim_cluster)
    answer = client.chat.completions.create(
        model=client.models.list().data[0].id, max_tokens=512,
        messages=[{"role": "user", "content": "Are you back?"}])
    assert answer.usage.completion_tokens > 0
    assert on_host(head, "docker", "inspect", "-f", "{{.State.Running}}", HEAD).strip() == "true"


REBOOT_TASK = "Reboot so the NVIDIA modules load without the override (H2)"


@pytest.mark.rule("H2")
@pytest.mark.full
def test_a_returned_modprobe_override_is_removed_without_rebooting_the_serving_worker(serving, run_playbook):
    # As a new user met it: an OS update put the modprobe override (H2) back on
    # the worker of a serving cluster. Drift names it; its fix is the deploy. The modules loaded at
    # this boot never read the file (its inode is newer than the boot), so removing it is the whole
    # fix: no reboot, and the engine, which a reboot under it would have
    # stopped hard (H4), keeps serving. A file that was there at boot and caps CUDA still reboots
    # the node, the engine stopped first: molecule/modprobe_override.
    head, worker = serving.hosts
    # Converged first: the recover case brought the cluster back with the launch step alone, which
    # writes no converged stamp (a full deploy does), and the re-run below must be a full one for the
    # returned file alone.
    assert_succeeded(run_playbook(PLAYBOOK, serving.inventory, timeout=3000), serving.hosts)
    override = "/etc/modprobe.d/zz-nvidia-drm-override.conf"  # modprobe_override_file
    # The first deploy removed the fresh Spark's override and kept it here (modprobe_override_backup_dir).
    on_host(worker, "cp", "/var/lib/gb10-serving/modprobe-backup/zz-nvidia-drm-override.conf", override)
    boots = {h: boot_id(h) for h in serving.hosts}
    leaks_before = leaks(serving.hosts)

    found = drift(run_playbook, serving)
    assert (worker, "H2") in findings(found), found

    fixed = run_playbook(PLAYBOOK, serving.inventory, timeout=3000)

    assert_succeeded(fixed, serving.hosts)
    # The returned file is what made this re-run a full one (01_converged.yml names it).
    said = fixed.results_by_host(task=CONVERGED_TASK)[head]["msg"]
    assert "%s: files %s: new" % (worker, override) in said, said
    done = [(e["event_data"].get("task"), e["event_data"].get("host")) for e in fixed.events
            if e.get("event") == "runner_on_ok"]
    assert not {(REBOOT_TASK, worker), (ENGINE_STOP_TASK, head), (CONTAINER_STOP_TASK, worker)} & set(done), done
    assert {h: boot_id(h) for h in serving.hosts} == boots
    assert not on_host(worker, "sh", "-c", "ls %s 2>/dev/null || true" % override).strip()
    assert leaks(serving.hosts) == leaks_before
    assert healthy(head) and worker_running(worker)
