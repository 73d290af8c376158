# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving watchdog (rule O4) on the simulated 2-Spark cluster, from a serving cluster:

- a rank stalled (SIGSTOP of the worker's engine process): /health still answers, generation
  does not; the watchdog on the head finds the hang by its deadline, keeps the logs, stops the
  engine gracefully, starts the same launch again, checks the known answer, and the cluster answers;
- every node powered off at once, the head back first (rule O5): the watchdog, back with the head,
  finds no engine and names the worker it waits for; once the worker is back too, Ray's containers
  (started by Docker at boot) form the cluster and the same launch serves again, the known answer
  checked, with no command from the controller;
- after the power cut, a real Prometheus (Debian's), started with the command the launch printed,
  scrapes every node's exporter (back with its node) and the engine (rule O6): the figures are the
  unified_memory module's, a leak planted on the worker shows on the worker alone, every series
  of the collection's Grafana dashboard has data, and it evaluates the cluster's alert rules with
  none of the engine's, the memory's or the watchdog's firing; it keeps scraping to the module's end;
- the worker's Ray container dying under its rank (the engine killed hard on one host): the
  watchdog reads the leak from that node's exporter, has only it reboot itself through the cluster
  SSH gate (reboot-if-leaked: its own reading, H4; its next kernel's NVIDIA modules, H1), waits for it,
  and the same launch serves again;
- an engine that fails on every start (its port held by another process): the restart budget is
  spent, no restart after it, and the state is in the watchdog's metrics, in the Prometheus started
  above (the engine-down and budget alerts firing for the head) and in drift.yml's O4
  finding (and, in the same drift run, a worker's Ray container that would not come back after a
  power cut is its O5 finding, its stopped metrics reader its O6 finding).

The watchdog is off on the simulated clusters (inventory/group_vars/gb10_sim.yml: the other fault
cases would race it); the launch step turns it on here, sized for the simulation. The module runs
after test_4 and before test_4c, because its last case leaves the engine down and spends the
budget: test_4c's launch with vLLM's own executor starts from there (what an operator does next),
and the TP=3 deploy's launch (test_5) removes the watchdog (gb10_watchdog false again).
"""

import json
import shlex
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from .helpers import (HEAD, LAUNCH, SUMMARY_TASK, TINY_ANSWER, WORKER, WATCHDOG_CONTAINER as CONTAINER,
                      WATCHDOG_DATA as DATA, WATCHDOG_SETTINGS as SETTINGS, api_client, assert_only_the_leaked_node_rebooted,
                      assert_succeeded, boot_id, budget_spent,
                      drift, drift_answers, engine_port_held, findings, healthy, kill_container_init, ok_results, on_host,
                      recovery_since, wait_for, watchdog_log, watchdog_state as state)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O4")

LINK_PROM = "/var/lib/gb10/link_check/link.prom"  # link_check_dir's default


def metrics(head):
    """{name{labels}: value} of the watchdog's Prometheus textfile."""
    lines = on_host(head, "cat", DATA + "/metrics.prom").splitlines()
    return dict(line.rsplit(" ", 1) for line in lines if line and not line.startswith("#"))


def running_as_set_here(head):
    """The watchdog runs on the head with this module's settings."""
    out = subprocess.run(["docker", "exec", head, "sh", "-c", "docker inspect -f '{{.State.Running}}' %s && "
                          "cat /etc/gb10/watchdog.json" % CONTAINER], capture_output=True, text=True, timeout=60, check=False)
    if out.returncode != 0 or not out.stdout.startswith("true"):
        return False
    config = json.loads(out.stdout.split("\n", 1)[1])
    wanted = (SETTINGS["watchdog_interval_s"], SETTINGS["watchdog_max_restarts"])
    return (config["interval_s"], config["max_restarts"]) == wanted


@pytest.fixture
def watchdog(sim_cluster, serving, run_playbook):
    """The serving cluster with the watchdog running on its head: the launch step, engine kept; once
    per module (a later case finds it running with these settings)."""
    head = sim_cluster.head
    if not running_as_set_here(head):
        result = run_playbook(LAUNCH, sim_cluster.inventory, timeout=1800, extravars=SETTINGS)
        assert_succeeded(result, sim_cluster.hosts)
    wait_for("a first probe that got tokens", lambda: state(head).get("last_probe", {}).get("verdict") == "ok", 60)
    return sim_cluster


@pytest.mark.rule("O4")
def test_a_stalled_rank_is_found_by_its_deadline_and_the_cluster_answers_again(watchdog):
    head, worker = watchdog.head, watchdog.hosts[1]
    engine_pid = on_host(head, "docker", "exec", HEAD, "cat", "/var/lib/gb10-engine/pid").strip()
    budget = budget_left(head)

    # The worker's rank stops (SIGSTOP): a process that is there and answers nothing.
    on_host(worker, "docker", "exec", WORKER, "pkill", "-STOP", "-f", "^ray::RayWorker")
    stalled = time.time()
    assert healthy(head)  # /health still says 200: what a health check alone misses

    recovery = recovery_since(head, stalled, "a recovery of the stall that ends serving", 240)

    # No token within the deadline (before the first, or mid-answer when the stall hit a probe).
    assert recovery["reason"] == "hang" and recovery["probe"]["error"] == "timeout", recovery
    # Found by the deadline: the probe that gave up started after the stall, at most a probe
    # interval (3 s) plus its deadline (10 s) before the recovery began.
    assert recovery["started"] - stalled <= 3 + 10 + 10, (recovery["started"] - stalled)
    # The engine's and Ray's logs of the hung engine are kept, and the stop was graceful (H4).
    kept = on_host(head, "ls", recovery["incident"]).split()
    assert {"engine.log", HEAD + ".log", "recovery.json"} <= set(kept), kept
    assert "gb10-engine: starting" in on_host(head, "cat", recovery["incident"] + "/engine.log")
    assert recovery["stopped"] == "stopped", recovery
    # A new engine of the same launch, checked by the profile's known answer, answers a client.
    assert on_host(head, "docker", "exec", HEAD, "cat", "/var/lib/gb10-engine/pid").strip() != engine_pid
    assert TINY_ANSWER.strip() in recovery["answer"], recovery
    assert healthy(head)
    assert metrics(head)['gb10_watchdog_status{status="serving"}'] == "1"
    # One recovery spent one restart of the budget (whatever earlier cases left).
    assert budget_left(head) == budget - 1


@pytest.mark.rule("O5")
def test_after_a_power_cut_the_cluster_serves_again_with_no_command(watchdog, run_playbook):
    head, worker = watchdog.head, watchdog.hosts[1]
    # A launch again with nothing changed, the watchdog on as on a Spark: changed=0 (O2), so the
    # Ray containers' comparison leaves the policy that the launch step set after serving (O5).
    rerun = run_playbook(LAUNCH, watchdog.inventory, timeout=1800, extravars=SETTINGS)
    assert_succeeded(rerun, watchdog.hosts)
    # Where the metrics are (O6), for the Prometheus case after this one.
    PRINTED.extend(line for line in rerun.results_by_host(task=SUMMARY_TASK)[head]["msg"]
                   if line.startswith("Metrics (O6): "))
    assert {h: rerun.stats[h]["changed"] for h in watchdog.hosts} == {h: 0 for h in watchdog.hosts}, rerun.stats
    for host, name in ((head, HEAD), (worker, WORKER)):
        assert on_host(host, "docker", "inspect", "-f", "{{.HostConfig.RestartPolicy.Name}}", name).strip() \
            == "unless-stopped", host

    budget = budget_left(head)
    # The power goes: every process of both nodes killed at once, no shutdown. It comes back on
    # the head first; the worker stays dark for now.
    subprocess.run(["docker", "kill", head, worker], check=True, capture_output=True, timeout=120)
    cut = time.time()
    subprocess.run(["docker", "start", head], check=True, capture_output=True, timeout=120)

    # The watchdog, back with the head, finds no engine and waits for the worker, by name.
    waiting = "waiting for %s (%s)" % (worker, watchdog.cluster_ips[worker])
    wait_for("the watchdog naming the node it waits for", lambda: waiting in watchdog_log(head), 120)
    assert not healthy(head)

    subprocess.run(["docker", "start", worker], check=True, capture_output=True, timeout=120)

    # Nothing from here on comes from the controller: the nodes' own Docker and the watchdog.
    recovery = recovery_since(head, cut, "the cluster serving again after the power cut", 300)
    assert recovery["reason"] == "down", recovery
    assert TINY_ANSWER.strip() in recovery["answer"], recovery
    assert healthy(head)
    # And the way in that a client has, the gateway, came back with the head (started at boot).
    assert api_client(watchdog, timeout=60).models.list().data
    assert budget_left(head) == budget - 1


PRINTED = []  # the launch summary's metrics line, kept by the power-cut case
READER = "gb10-node-metrics"  # node_metrics_container's default
DASHBOARD = "roles/node_metrics/files/grafana-gb10-serving.json"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Prometheus:
    """Debian's Prometheus, started with the command the launch printed (PRINTED), with a data folder
    and a loopback address of its own; it keeps scraping from the case that starts it to the end of
    the module, so a later case reads what its alerts made of the cluster since."""

    def __init__(self, folder):
        assert len(PRINTED) == 1 and "/metrics, the same on every node" in PRINTED[0], PRINTED
        command = PRINTED[0].split("Prometheus for the cluster: ", 1)[1]
        self.port = free_port()
        self.log_path = folder / "prometheus.log"
        argv = shlex.split(command) + ["--storage.tsdb.path=%s" % (folder / "data"),
                                       "--web.listen-address=127.0.0.1:%d" % self.port]
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    def query(self, expr):
        """The instant query's result; nothing while Prometheus is still starting."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (self.port, urllib.parse.urlencode({"query": expr}))
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                return json.load(answer)["data"]["result"]
        except OSError:
            assert self.process.poll() is None, open(self.log_path).read()[-2000:]
            return []

    def by_node(self, expr):
        return {r["metric"].get("node"): float(r["value"][1]) for r in self.query(expr)}

    def firing(self, alert):
        """The nodes the alert fires for."""
        return {r["metric"].get("node") for r in self.query('ALERTS{alertname="%s",alertstate="firing"}' % alert)}

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=60)
        self.log.close()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    server = Prometheus(tmp_path_factory.mktemp("prometheus"))
    yield server
    server.stop()


@pytest.mark.rule("O6", "A1", "H12")
def test_prometheus_scrapes_every_node_and_the_engine_with_the_module_figures(watchdog, run_adhoc, prometheus):
    head, worker = watchdog.head, watchdog.hosts[1]
    port, query, by_node = prometheus.port, prometheus.query, prometheus.by_node

    # Every node's exporter (back with its node after the power cut) and the engine, up.
    targets = {(h, "gb10-node") for h in watchdog.hosts} | {(head, "gb10-engine")}
    try:
        wait_for("every target scraped and up",
                 lambda: {(r["metric"]["node"], r["metric"]["job"]) for r in query("up") if r["value"][1] == "1"}
                 == targets, 90)
    except AssertionError as late:
        # What Prometheus itself says of each target: the one that is down and why.
        raise AssertionError("%s; Prometheus's targets: %s" % (late, scrape_targets(port))) from None

    # A leak on the worker (memory held by the driver, H4): its figures move, the head's do not,
    # and they are what the unified_memory module reports on each node. The serving worker's
    # engine holds its gpu_memory_utilization share of the pool, so the leak is half of what the
    # node still has available, as Prometheus reads it (a leak cannot outgrow the pool).
    before = by_node("gb10_unified_memory_unaccounted_gib")
    leak = round(by_node("gb10_unified_memory_available_gib")[worker] / 2, 1)
    assert leak >= 2, ("the serving worker has almost nothing available", leak * 2)
    on_host(worker, "/opt/gb10-sim/bin/gb10-plant-leak", str(leak))
    try:
        wait_for("the leak in Prometheus", lambda: by_node("gb10_unified_memory_unaccounted_gib").get(worker, 0)
                 >= before[worker] + leak - 0.1, 60)
        read = run_adhoc("gb10.serving.unified_memory", "proc_root={{ gb10_proc_root }} "
                         "nvidia_smi={{ gb10_nvidia_smi }} cuda_probe={{ gb10_cuda_probe }}", watchdog.inventory)
        module = ok_results(read, watchdog.hosts)
        for key in ("total_gib", "available_gib", "unaccounted_gib"):
            scraped = by_node("gb10_unified_memory_" + key)
            assert scraped == {h: module[h][key] for h in watchdog.hosts}, (key, scraped, module)
        assert by_node("gb10_unified_memory_unaccounted_gib")[head] == before[head]
        # The engine's ranks hold GPU memory on both nodes: a gap, not a leak (H4's verdict).
        assert by_node("gb10_gpu_workload") == {h: 1.0 for h in watchdog.hosts}
        assert by_node("gb10_unified_memory_leaked") == {h: 0.0 for h in watchdog.hosts}
    finally:
        on_host(worker, "/opt/gb10-sim/bin/gb10-plant-leak", "0")

    # A worker stuck in the GB10's low-power state (H12): the fixture kit's clock under load falls
    # to ~702 MHz (eugr/spark-vllm-docker issue 334). Under the engine's own load, the exporters'
    # verdicts reach Prometheus, the worker stuck and the head not, and the alert names the worker.
    on_host(worker, "/opt/gb10-sim/bin/gb10-sim-set", "gpu_clock_stuck=1")
    try:
        client = api_client(watchdog, timeout=120)
        model = client.models.list().data[0].id
        deadline = time.time() + 240
        while by_node("gb10_gpu_clock_low") != {head: 0.0, worker: 1.0} and time.time() < deadline:
            client.completions.create(model=model, prompt="Count to fifty:", max_tokens=64)
        under_load = by_node("gb10_gpu_sm_clock_under_load_mhz")
        assert by_node("gb10_gpu_clock_low") == {head: 0.0, worker: 1.0}, under_load
        assert under_load[worker] < by_node("gb10_gpu_clock_floor_mhz")[worker] <= under_load[head], under_load
        wait_for("the low clock alert for the worker alone", lambda: prometheus.firing("GB10GpuClockLow") == {worker}, 60)
    finally:
        on_host(worker, "/opt/gb10-sim/bin/gb10-sim-set", "gpu_clock_stuck=0")

    # The link measurement, the watchdog's state and the engine's own series: every expression
    # of the dashboard the collection ships has data (a rate needs two scrapes).
    with open(DASHBOARD) as f:
        exprs = [t["expr"] for panel in json.load(f)["panels"] for t in panel.get("targets", [])]
    wait_for("data for every dashboard expression", lambda: all(query(expr) for expr in exprs), 60)
    # The link series is each node's last measurement, whatever it found: the cases of test_4 that
    # break the link on purpose leave a failed one, and nothing measures the link again before this.
    for name in ("gb10_link_check_ok", "gb10_link_check_timestamp_seconds"):
        assert by_node(name) == {h: last_link_check(h)[name] for h in watchdog.hosts}, name
    assert by_node("gb10_engine_answering") == {head: 1.0}
    assert by_node("gb10_watchdog_restart_budget_left") == {head: float(budget_left(head))}
    # The alert rules the configuration loads (rule_files, written beside it): Prometheus evaluates
    # every one over these series without an error, and the serving cluster fires none of the
    # engine's, the memory's or the watchdog's (promtool's unit cases show each one firing).
    wait_for("every alert rule evaluated", lambda: alert_rules(port) and all(
        rule["health"] == "ok" for rule in alert_rules(port).values()), 60)
    assert set(alert_rules(port)) == {"GB10EngineDown", "GB10KnownAnswerWrong", "GB10UnifiedMemoryLeaked",
                                      "GB10RestartBudgetSpent", "GB10LinkUnderFloor", "GB10MemoryLow",
                                      "GB10ScrapeDown", "GB10GpuClockLow", "GB10NodeReadingStale"}, alert_rules(port)
    firing = {r["metric"]["alertname"] for r in query('ALERTS{alertstate="firing"}')}
    assert not firing & {"GB10EngineDown", "GB10KnownAnswerWrong", "GB10UnifiedMemoryLeaked",
                         "GB10RestartBudgetSpent", "GB10ScrapeDown", "GB10NodeReadingStale"}, firing


def budget_left(head):
    """Recoveries the watchdog's budget still allows, as its metrics say."""
    return int(metrics(head)["gb10_watchdog_restart_budget_left"])


def alert_rules(port):
    """{alert name: rule} of the gb10-serving group, as Prometheus's own API reports its rules."""
    with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/rules" % port, timeout=10) as answer:
        groups = json.load(answer)["data"]["groups"]
    return {rule["name"]: rule for group in groups if group["name"] == "gb10-serving" for rule in group["rules"]}


def scrape_targets(port):
    """[(job, node, health, lastError)] of every target, as Prometheus's own API reports them."""
    url = "http://127.0.0.1:%d/api/v1/targets" % port
    with urllib.request.urlopen(url, timeout=10) as answer:
        active = json.load(answer)["data"]["activeTargets"]
    return [(t["labels"].get("job"), t["labels"].get("node"), t["health"], t["lastError"]) for t in active]


def last_link_check(host):
    """{series: value} of the link check's last measurement on the node, as written there."""
    text = on_host(host, "cat", LINK_PROM)
    return {line.split()[0]: float(line.split()[-1]) for line in text.splitlines()
            if line.startswith(("gb10_link_check_ok ", "gb10_link_check_timestamp_seconds "))}


@pytest.mark.rule("O4")
def test_an_engine_killed_with_its_container_leaks_there_and_only_that_node_reboots(watchdog):
    head, worker = watchdog.head, watchdog.hosts[1]
    boots = {h: boot_id(h) for h in watchdog.hosts}
    budget = budget_left(head)
    # The worker's Ray container dies under its rank (its init killed, as a crash or the kernel's
    # OOM killer ends it; not a `docker kill`, after which Docker would not start it again): the
    # simulated driver keeps the rank's unified memory until a reboot (the fixture's ledger, H4), as
    # a Spark's does; nobody plants it. Docker restarts the container (unless-stopped, O5).
    killed = kill_container_init(worker, WORKER)

    recovery = recovery_since(head, killed, "the leaked worker rebooted and the cluster serving again", 360)
    # The leak is found on the node that had it, from its exporter's reading after the engine
    # stopped; only that node rebooted, and the same launch answers the known answer again.
    assert_only_the_leaked_node_rebooted(recovery, worker, boots)
    # The head's reading is healthy (a healthy node is never rebooted); the worker rebooted on its
    # own reading (reboot-if-leaked through the cluster SSH gate), which the reboot freed.
    assert recovery["memory"][head]["state"] == "healthy", recovery["memory"]
    answer = recovery["rebooted"][worker]
    assert answer["rebooting"] and answer["leaked"] and answer["unaccounted_gib"] > answer["threshold_gib"], answer
    assert recovery["memory_after_reboot"][worker]["state"] == "healthy", recovery["memory_after_reboot"]
    assert healthy(head)
    assert budget_left(head) == budget - 1


@pytest.mark.rule("O4", "O5", "O6")
def test_an_engine_that_fails_on_every_start_spends_the_budget_and_is_reported(watchdog, run_playbook, prometheus):
    head = watchdog.head
    # Every start of the engine fails: its port is held by a process that closes every connection.
    with engine_port_held(head, HEAD):
        spent = budget_spent(head, 240)
        # What the budget had left was tried, and failed: the relaunched engine exited.
        assert len(spent["recoveries"]) == SETTINGS["watchdog_max_restarts"], spent
        assert spent["last_recovery"]["result"].startswith("failed: the relaunched engine exited"), spent
        # No restart after it: more probes, the same recoveries.
        probed = spent["last_probe"]["at"]
        wait_for("two more probes", lambda: state(head)["last_probe"]["at"] > probed + 5, 60)
        assert len(state(head)["recoveries"]) == len(spent["recoveries"])
        seen = metrics(head)
        assert seen['gb10_watchdog_status{status="out_of_budget"}'] == "1", seen
        assert seen["gb10_watchdog_restart_budget_left"] == "0" and seen["gb10_engine_answering"] == "0", seen

        # drift.yml names it under O4 on the head (the engine that does not run is R1's). In the
        # same run: the worker's Ray container set back to restart `no`, which would leave that
        # node out after a power cut, is its O5 finding; the head's, as the launch set it, is none.
        # Its metrics reader stopped is its O6 finding (the deploy starts it again).
        worker = watchdog.hosts[1]
        on_host(worker, "docker", "update", "--restart", "no", WORKER)
        on_host(worker, "docker", "stop", READER)
        # With the variables the launch ran with, as an operator's CI job would (the exporters'
        # interval differing from the launch's is a configuration drift, O6).
        result = drift(run_playbook, watchdog, **{k: v for k, v in SETTINGS.items() if k != "gb10_profile"})
        assert result.status == "failed"
        found = findings(result)
        assert {(head, "O4"), (head, "R1"), (worker, "O5"), (worker, "O6")} <= found, found
        assert (head, "O5") not in found and (head, "O6") not in found, found
        message = [answer["finding"] for host, unused_task, answer in drift_answers(result)
                   if host == head and answer["rule"] == "O4"]
        assert message and "gave up: %d recoveries within 3600 s" % SETTINGS["watchdog_max_restarts"] in message[0], message

        # The real Prometheus that has scraped the cluster since the case above, with the rules the
        # deploy wrote: the engine that stays down fires GB10EngineDown for the head once its two
        # minutes have passed, and the spent budget GB10RestartBudgetSpent; the worker's stopped
        # reader leaves its last page with the node exporter, and GB10NodeReadingStale names that
        # node once the page is a minute old and stays so a minute.
        wait_for("the stopped engine, the spent budget and the stale reading firing in Prometheus", lambda: (
            prometheus.firing("GB10EngineDown"), prometheus.firing("GB10RestartBudgetSpent"),
            prometheus.firing("GB10NodeReadingStale")) == ({head}, {head}, {worker}), 300)
