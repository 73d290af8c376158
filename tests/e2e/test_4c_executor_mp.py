# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM's own multi-node executor beside Ray (X1-X3), chained on the 2-Spark cluster that
test_4b's watchdog left out of budget (its Ray engine down after every start failed):

- the operator's next step there, a launch with the other executor, takes the clean path: no node
  leaks or reboots, the same profile serves the known answer with a rank in each node's serving
  container (rank 0 with the API on the head, a headless rank on the worker), nothing of Ray runs
  on either node, and the serving run gives the watchdog its budget back;
- the watchdog keeps it serving: a stalled headless rank on the worker is found by its deadline,
  every rank is stopped (rank 0 first, then the worker's through the cluster SSH gate) and started
  again, the known answer checked; a launch again changes nothing (O2) and drift finds the cluster
  as deployed (O3);
- `full`: a stall of rank 0's own worker on the head (its API still says healthy) is found and every
  rank starts again; after a power cut the nodes' own Docker starts the serving containers and the
  watchdog starts every rank again; rank 0's port held by another process makes every start fail,
  each try stopping the worker's rank through the gate, until the budget is spent; then the cluster
  switches back to Ray from there by the same clean path (what the last try left stopped on
  SIGTERM, rank 0 first), which gives the watchdog its budget back.

The whole module is in `full` (the test command's budget): its two first cases cost about 220 s
of the default run's e2e stage on a 2-core machine busy with the other lanes (148 s and 72 s, two
starts of an mp engine, 2026-12-07), which had grown to its limit. The default run still launches
every profile's command line through vLLM's own parser for both executors (tests/engine), and the
mesh (test_5, `full`) switches a serving Ray engine to mp and back and cuts the power of all three.
Why this order within it: the switch back to Ray and the power cut under this executor come last;
the graceful stop of a serving Ray engine before its containers is what test_4's fault cases
already show at TP=2.
"""

import json
import subprocess
import time

import pytest

from .helpers import (ENGINE_STATE, ENGINE_STOP_TASK, HEAD, KNOWN_ANSWER_TASK, LAUNCH, MP_HEAD, MP_WORKER,
                      RANK_STOP_TASK, TINY_ANSWER, WATCHDOG_DATA, WATCHDOG_SETTINGS, WORKER, api_client,
                      assert_succeeded, budget_spent, drift, engine_port_held, engine_stops, findings, healthy, leaks, on_host,
                      recovery_since, serves, wait_for, watchdog_log, watchdog_state)

pytestmark = [pytest.mark.rule("X2"), pytest.mark.full]

MP = dict(WATCHDOG_SETTINGS, gb10_executor="mp")
RAY_PROCESSES = ("raylet", "gcs_server", "plasma", "ray::")


def host_started(host):
    """When the simulated Spark itself last started (a reboot starts it again)."""
    return subprocess.run(["docker", "inspect", "-f", "{{.State.StartedAt}}", host], capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def running(host):
    return on_host(host, "docker", "ps", "--format", "{{.Names}}").split()


def rank_argv(host, container):
    """argv of the rank whose pid the launch script wrote in that serving container."""
    out = on_host(host, "docker", "exec", container, "sh", "-c",
                  'tr "\\0" "\\n" < /proc/$(cat %s/pid)/cmdline' % ENGINE_STATE)
    return out.splitlines()


def rank_pid(host, container):
    return on_host(host, "docker", "exec", container, "cat", ENGINE_STATE + "/pid").strip()


def ray_processes(host):
    """Ray's own processes anywhere on the node (its containers' processes are the node's too): its
    raylet, GCS and workers, or a `ray start`."""
    return [line for line in on_host(host, "ps", "-eo", "args").splitlines()
            if "bin/ray start" in line
            or any(line.startswith(name) or ("/" + name) in line.split(" ")[0] for name in RAY_PROCESSES)]


def serving_watchdog(head):
    """The watchdog's state once one of its probes got tokens, read once (bounded wait)."""
    def probed_ok():
        state = watchdog_state(head)
        return state if state.get("last_probe", {}).get("verdict") == "ok" else None
    return wait_for("the watchdog's first good probe", probed_ok, 60)


def switch(cluster, run_playbook, extravars):
    """The launch step with another executor: it succeeds, and no node leaks or reboots (the clean
    path stops the running engine before its containers, H4)."""
    leaks_before, started = leaks(cluster.hosts), {h: host_started(h) for h in cluster.hosts}
    result = run_playbook(LAUNCH, cluster.inventory, timeout=1800, extravars=extravars)
    assert_succeeded(result, cluster.hosts)
    assert leaks(cluster.hosts) == leaks_before
    assert {h: host_started(h) for h in cluster.hosts} == started
    return result


def serves_mp(cluster):
    head, worker = cluster.head, cluster.hosts[1]
    return MP_HEAD in running(head) and MP_WORKER in running(worker) and api_client(cluster, timeout=60).models.list().data


@pytest.mark.rule("X1", "X2", "O1", "H4")
def test_a_cluster_whose_watchdog_gave_up_switches_to_vllms_own_executor_by_the_clean_path(sim_cluster, run_playbook):
    cluster = sim_cluster
    head, worker = cluster.head, cluster.hosts[1]
    # Where test_4b left it: the watchdog spent its budget on an engine that could not start.
    assert watchdog_state(head)["status"] == "out_of_budget"

    result = switch(cluster, run_playbook, MP)

    # A rank in each node's serving container: rank 0 with the API server on the head, a headless
    # rank on the worker meeting it at the head's cluster address (X1).
    head_argv, worker_argv = rank_argv(head, MP_HEAD), rank_argv(worker, MP_WORKER)
    assert "--headless" not in head_argv and head_argv[head_argv.index("--node-rank") + 1] == "0", head_argv
    assert "--headless" in worker_argv and worker_argv[worker_argv.index("--node-rank") + 1] == "1", worker_argv
    for argv in (head_argv, worker_argv):
        assert argv[argv.index("--master-addr") + 1] == cluster.cluster_ips[head], argv
        assert argv[argv.index("--distributed-executor-backend") + 1] == "mp", argv
    # Nothing of Ray runs where Ray is not used: no Ray container, no raylet, GCS or object store.
    for host in cluster.hosts:
        assert not {HEAD, WORKER} & set(running(host)), (host, running(host))
        assert ray_processes(host) == [], (host, ray_processes(host))
    # The split answers right (a broken one answers fluently but wrongly), through the gateway.
    assert result.results_by_host(task=KNOWN_ANSWER_TASK)[head]
    reply = api_client(cluster).chat.completions.create(
        model="minimax-m2.7", max_tokens=16, temperature=0, messages=[{"role": "user", "content": "Hello"}])
    assert TINY_ANSWER.strip() in reply.choices[0].message.content
    # A run that serves gives the watchdog its budget back (the launch is a new one).
    state = serving_watchdog(head)
    assert state["status"] != "out_of_budget" and state["recoveries"] == [], state


def stall_until_recovered(cluster, host, container):
    """The worker process of the rank in `container` on `host` stops (SIGSTOP: there, answering
    nothing): the API on the head still says healthy, generation hangs on both nodes. The
    watchdog's recovery that ends serving: found as a hang, rank 0 stopped first, then the worker's
    rank through the cluster SSH gate, each on SIGTERM (H4), every rank started again and the known
    answer checked."""
    head, worker = cluster.head, cluster.hosts[1]
    serving_watchdog(head)
    pids = rank_pid(head, MP_HEAD), rank_pid(worker, MP_WORKER)

    on_host(host, "docker", "exec", container, "pkill", "-STOP", "-f", "^VLLM::Worker")
    stalled = time.time()
    assert healthy(head, MP_HEAD)  # what a health check alone misses

    recovery = recovery_since(head, stalled, "a recovery of the stalled rank on %s that ends serving" % host, 240)
    assert recovery["reason"] == "hang", recovery
    assert recovery["stopped"] == "stopped; %s: stopped" % worker, recovery
    assert TINY_ANSWER.strip() in recovery["answer"], recovery
    assert (rank_pid(head, MP_HEAD), rank_pid(worker, MP_WORKER)) != pids
    return recovery


@pytest.mark.rule("O4", "X3")
def test_a_stalled_headless_rank_is_found_and_every_rank_starts_again(sim_cluster):
    worker = sim_cluster.hosts[1]
    stall_until_recovered(sim_cluster, worker, MP_WORKER)
    assert "with the ranks on %s" % worker in watchdog_log(sim_cluster.head)
    # Only the head stops or starts a rank through the gate: the same program asked in a session
    # from another address (what sshd sets for a peer's key) is refused, the rank left running.
    pid = rank_pid(worker, MP_WORKER)
    asked = subprocess.run(["docker", "exec", "-e", "SSH_CONNECTION=192.0.2.7 40000 %s 22" % sim_cluster.cluster_ips[worker],
                            worker, "/usr/local/sbin/gb10-engine-rank", "stop"], capture_output=True, text=True, timeout=120,
                           check=False)
    assert asked.returncode == 77 and "stop refused for 192.0.2.7: only the head" in asked.stderr, asked
    assert rank_pid(worker, MP_WORKER) == pid and serves_mp(sim_cluster)


@pytest.mark.rule("O4", "X3")
def test_a_stalled_rank_on_the_head_is_found_and_every_rank_starts_again(sim_cluster):
    # Rank 0's own worker process, beside the API server: the worker's rank waits on it.
    stall_until_recovered(sim_cluster, sim_cluster.head, MP_HEAD)
    assert serves_mp(sim_cluster)


# `full` (the test budget): a re-run that changes nothing and drift are the Ray cluster's default
# cases (test_2a, test_2b); this adds every rank of vLLM's own executor.
@pytest.mark.rule("O2", "O3")
def test_a_launch_again_changes_nothing_and_drift_finds_every_rank_as_deployed(sim_cluster, run_playbook):
    cluster = sim_cluster
    head, worker = cluster.head, cluster.hosts[1]
    # A launch again with nothing changed: nothing changes (O2), and each node's serving container
    # is one that Docker brings back at boot (O5; the power cut below, `full`).
    rerun = run_playbook(LAUNCH, cluster.inventory, timeout=1800, extravars=MP)
    assert_succeeded(rerun, cluster.hosts)
    assert {h: rerun.stats[h]["changed"] for h in cluster.hosts} == {h: 0 for h in cluster.hosts}, rerun.stats
    for host, name in ((head, MP_HEAD), (worker, MP_WORKER)):
        assert on_host(host, "docker", "inspect", "-f", "{{.HostConfig.RestartPolicy.Name}}", name).strip() \
            == "unless-stopped", host
    # And drift, with the variables the launch ran with, finds the cluster as deployed (O3): the
    # serving containers without Ray, every rank's launch, the watchdog and its gate entry.
    checked = drift(run_playbook, cluster, **{k: v for k, v in MP.items() if k != "gb10_profile"})
    assert checked.status == "successful" and findings(checked) == set(), findings(checked)


@pytest.mark.rule("O5")
def test_after_a_power_cut_every_rank_starts_again_with_no_command(sim_cluster):
    cluster = sim_cluster
    head, worker = cluster.head, cluster.hosts[1]
    subprocess.run(["docker", "kill", head, worker], check=True, capture_output=True, timeout=120)
    cut = time.time()
    subprocess.run(["docker", "start", head], check=True, capture_output=True, timeout=120)
    # Back with the head, the watchdog names the node whose serving container does not answer yet.
    waiting = "waiting for %s (%s)" % (worker, cluster.cluster_ips[worker])
    wait_for("the watchdog naming the node it waits for", lambda: waiting in watchdog_log(head), 120)
    subprocess.run(["docker", "start", worker], check=True, capture_output=True, timeout=120)

    recovery = recovery_since(head, cut, "every rank serving again after the power cut", 300)
    assert recovery["reason"] == "down", recovery
    assert TINY_ANSWER.strip() in recovery["answer"], recovery
    assert serves_mp(cluster)


@pytest.mark.rule("O4", "X3")
def test_an_mp_engine_that_fails_on_every_start_spends_the_budget(sim_cluster):
    cluster = sim_cluster
    head, worker = cluster.head, cluster.hosts[1]
    serving_watchdog(head)
    # As test_4b's budget case under Ray: rank 0's port held, so every start fails.
    with engine_port_held(head, MP_HEAD) as faulted:
        budget = WATCHDOG_SETTINGS["watchdog_max_restarts"]
        spent = budget_spent(head, 300)
        recoveries = [json.loads(on_host(head, "cat", path))
                      for path in on_host(head, "sh", "-c", "ls -d %s/incidents/*/recovery.json" % WATCHDOG_DATA).split()]
        # What the budget had left (the recoveries of this launch before it count: the stalls and
        # the power cut) was tried, and failed.
        tries = [r for r in recoveries if r["started"] >= faulted]
        assert len(spent["recoveries"]) == budget and tries, (spent, tries)
        # Each try stopped every rank, the worker's through the gate (X3), and started them again:
        # rank 0 exited on its port, so the budget ran out on rank 0's own failure.
        for tried in tries:
            assert tried["stopped"].endswith("; %s: stopped" % worker) or tried["stopped"].endswith("; %s: none" % worker), tried
            assert tried["result"].startswith("failed: the relaunched engine exited"), tried
        # No restart after it: more probes, the same recoveries.
        probed = spent["last_probe"]["at"]
        wait_for("two more probes", lambda: watchdog_state(head)["last_probe"]["at"] > probed + 5, 60)
        assert len(watchdog_state(head)["recoveries"]) == budget
        assert "OUT OF BUDGET" in watchdog_log(head)


@pytest.mark.rule("O1", "X3", "H4")
def test_the_cluster_whose_mp_watchdog_gave_up_switches_back_to_ray_by_the_clean_path(sim_cluster, run_playbook):
    cluster = sim_cluster
    head, worker = cluster.head, cluster.hosts[1]
    assert watchdog_state(head)["status"] == "out_of_budget"

    result = switch(cluster, run_playbook, WATCHDOG_SETTINGS)

    # What the last try left (rank 0 exited; the worker's rank waiting for it) stops on SIGTERM,
    # rank 0's stop before the worker's (H4, X3); the serving mp engine's own ordered stop is
    # test_5's switch on three nodes and this module's stalled-rank recoveries.
    stops = [e["event_data"]["task"] for e in result.events if e.get("event") == "runner_on_ok"
             and e["event_data"].get("task") in (ENGINE_STOP_TASK, RANK_STOP_TASK)]
    assert stops.index(ENGINE_STOP_TASK) < stops.index(RANK_STOP_TASK), stops
    for task in (ENGINE_STOP_TASK, RANK_STOP_TASK):
        assert "killed" not in engine_stops(result, task).values(), engine_stops(result, task)
    for host in cluster.hosts:
        assert not {MP_HEAD, MP_WORKER} & set(running(host)), (host, running(host))
    # The watchdog's way to the worker's rank is gone with the executor that needed it.
    gate = on_host(worker, "sh", "-c", "ls /etc/gb10/cluster-ssh-gate.d; ls /usr/local/sbin")
    assert "engine-rank" not in gate, gate
    assert serves(cluster)
    assert result.results_by_host(task=KNOWN_ANSWER_TASK)[head]
    argv = rank_argv(head, HEAD)
    assert argv[argv.index("--distributed-executor-backend") + 1] == "ray" and "--nnodes" not in argv, argv
    state = serving_watchdog(head)
    assert state["status"] != "out_of_budget" and state["recoveries"] == [], state
