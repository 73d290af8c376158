# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/deploy-m27.yml on the simulated 2-Spark cluster (TP=2), checked as a user would:
the playbook succeeds from fresh Sparks (link port without an address, image and model on the
head only), Ray inside the head container sees two nodes with one GPU each (R5), the engine runs
inside the Ray head container (R1), and the OpenAI Python client gets a chat answer from the
endpoint. The re-run that must change nothing is the installed collection's
(test_2a_installed_collection.py); drift on this cluster is test_2b_drift.py.
"""

import functools
import hashlib
import http.server
import json
import os
import re
import ssl
import subprocess
import threading

import openai
import pytest
import yaml

from .helpers import (API_PORT, HEAD, KNOWN_ANSWER_TASK, NETPLAN_FILE, PLAYBOOK, PROFILE, STATUS_TASK, SUMMARY_TASK, TINY_ANSWER,
                      TOP, WORKER, api_client, api_key, assert_succeeded, gateway_ca, engine_process, link_figures, link_state,
                      on_host, run_text)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("R2", "R3", "R4", "V7", "V9")

TP = 2


@pytest.fixture(scope="module")
def deployed(sim_cluster, run_playbook):
    result = run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=3000)
    assert_succeeded(result, sim_cluster.hosts)
    return result


@pytest.mark.rule("V8")
def test_the_run_ends_with_the_endpoint_and_the_answer_it_received(sim_cluster, deployed):
    head = sim_cluster.head
    summary = deployed.results_by_host(task=SUMMARY_TASK)[head]["msg"]
    assert "Endpoint: https://%s:%d/v1 (OpenAI API" % (sim_cluster.ips[head], API_PORT) in " ".join(summary), summary
    assert "TLS: the cluster CA is %s" % gateway_ca(head) in " ".join(summary), summary
    answered = [line for line in summary if line.startswith("Smoke test (V8) answered: ")]
    assert len(answered) == 1, summary
    # The smoke test's request went through the gateway with the key, so its task shows nothing of
    # it (no_log); what it received is the tiny model's one answer, sampled or not.
    said = answered[0][len("Smoke test (V8) answered: "):]
    assert TINY_ANSWER.strip() in said, said
    # The profile's question, greedy, got the tiny model's answer at TP=1 over both ranks.
    known = deployed.results_by_host(task=KNOWN_ANSWER_TASK)[head]["msg"]
    assert known.startswith("known answer: ") and TINY_ANSWER in known, known
    # What the packet filter lets in (A4), and the next commands with this run's inventory.
    firewall = [line for line in summary if line.startswith("Firewall (A4): ")]
    assert len(firewall) == 1 and firewall[0].startswith(
        "Firewall (A4): SSH (22) open to everyone; the API gateway (%d) to 0.0.0.0/0, ::/0; " % API_PORT), summary
    assert firewall[0].endswith(" only; anything else refused"), summary
    following = [line for line in summary if line.startswith("Next: ")]
    assert len(following) == 1, summary
    for playbook in ("status.yml", "benchmark.yml", "drift.yml"):
        assert "ansible-playbook %s -i %s" % (os.path.join(TOP, "playbooks", playbook),
                                              os.path.join(TOP, sim_cluster.inventory)) in following[0], following


@pytest.mark.rule("M2", "H3")
def test_the_first_deploy_fits_right_after_the_model_arrived_through_the_heads_page_cache(sim_cluster, deployed):
    # The checkpoint came onto the head through its page cache (tests/sim/cluster.py, as an owner's
    # download does): on a GB10 CUDA's free figure is MemFree, and MemFree is nearly gone. The cache
    # is reclaimable, vLLM sizes from available memory on an integrated GPU, and the launch drops it:
    # preflight fits on what is available, and the leak check after the drop sees it back.
    head = sim_cluster.head
    at_preflight = deployed.results_by_host(task="Read this node's unified memory (M2, H3-H5)")[head]
    after_drop = deployed.results_by_host(task="Account for unified memory (H4)")[head]
    assert at_preflight["cuda_free_gib"] < 10 and at_preflight["reclaimable_gib"] > 100, at_preflight
    assert not at_preflight["leaked"], at_preflight
    assert after_drop["cuda_free_gib"] > 100 and after_drop["reclaimable_gib"] < 10, after_drop


@pytest.mark.rule("H4", "H10")
def test_a_serving_node_holds_its_engines_share_and_is_neither_leaked_nor_short(sim_cluster, deployed):
    # A live vLLM engine holds gpu_memory_utilization x the pool on every node with a rank (the
    # fixture kit's ledger): ~17 GiB available while it serves, as a GB10's does. Nothing there is a
    # leak, and the OOM guard (the test below) stays quiet.
    for host in sim_cluster.hosts:
        state = dict(line.split("=", 1) for line in on_host(host, "cat", "/var/lib/gb10-sim/state").split())
        assert abs(float(state["engine_gib"]) - 0.82 * 119.7) < 0.5, (host, state)
        assert float(state["leak_gib"]) == 0, (host, state)
        meminfo = on_host(host, "cat", "/var/lib/gb10-sim/proc/meminfo")
        available_gib = int(re.search(r"MemAvailable:\s+([0-9]+) kB", meminfo).group(1)) / 1024 ** 2
        assert 10 < available_gib < 25, (host, meminfo)


def node_state(host):
    """What a read-only run must leave as it was: the kit's memory state, the containers and units."""
    return (on_host(host, "cat", "/var/lib/gb10-sim/state"), on_host(host, "docker", "ps", "-q", "--no-trunc"),
            on_host(host, "sh", "-c", "ls -la /etc/modprobe.d /etc/gb10 /var/lib/gb10 2>/dev/null | sort"))


@pytest.mark.rule("H2", "H3", "H4", "H10", "N1", "N5", "V7")
def test_the_report_reads_the_serving_cluster_changes_nothing_and_becomes_a_simulated_spark(
        sim_cluster, deployed, run_playbook, tmp_path):
    # playbooks/report.yml on the cluster while it serves: check mode and a real run change nothing
    # on a node; the real run writes the JSON and the page; the fixture kit takes the JSON's worker
    # as a simulated Spark, on which the deploys after this test serve.
    head, worker = sim_cluster.hosts
    # The worker's second ConnectX-7 endpoint negotiates x2 of its x4, as an ASUS GX10's does
    # (forums.developer.nvidia.com/t/367853): the report names it.
    on_host(worker, "gb10-sim-set", "pcie_width_p2=2")
    before = {h: node_state(h) for h in sim_cluster.hosts}
    # The short benchmark sized for the simulation's tiny model (the path, not speed).
    sizes = {"report_benchmark_prefill_tokens": 64, "report_benchmark_generate_tokens": 8, "report_benchmark_requests": 2}
    checked = run_playbook("playbooks/report.yml", sim_cluster.inventory, check=True, timeout=900,
                           extravars=dict(sizes, report_dir=str(tmp_path / "check")))
    assert_succeeded(checked, sim_cluster.hosts)
    assert all(stats["changed"] == 0 for stats in checked.stats.values()), checked.stats
    result = run_playbook("playbooks/report.yml", sim_cluster.inventory, timeout=900,
                          extravars=dict(sizes, report_dir=str(tmp_path / "reports")))
    assert_succeeded(result, sim_cluster.hosts)
    assert all(stats["changed"] == 0 for stats in result.stats.values()), result.stats
    assert {h: node_state(h) for h in sim_cluster.hosts} == before
    report = json.loads((tmp_path / "reports" / ("%s.report.json" % head)).read_text())
    page = (tmp_path / "reports" / ("%s.report.md" % head)).read_text()
    verdicts = dict((v["rule"], v) for v in report["verdicts"])
    # The serving GB10 as the simulation keeps it: CUDA's free figure is MemFree, the engine's hold is
    # no leak, the guard runs, the link's twins are RoCE devices at 200 Gb/s.
    for rule in ("H1", "H2", "H3", "H4", "H10", "N1", "N5"):
        assert verdicts[rule]["verdict"] == "holds", verdicts[rule]
    assert "engine running" in verdicts["H4"]["figure"], verdicts["H4"]
    # The link's figure is also the all-reduce the deploy's link check measured, per node.
    assert verdicts["N5"]["figure"].count("all-reduce") == 2 and "passed" in verdicts["N5"]["figure"], verdicts["N5"]
    assert report["nodes"][worker]["memory"]["gpu_held_gib"] > 80, report["nodes"][worker]
    assert "| H3 | holds |" in page and "## %s" % worker in page
    # What the engine runs, asked of the head's running serving container: Ray for the Ray executor
    # (R1), the NCCL the engine loads by its runtime version and file (the image's stand-in, N7), and
    # Triton, which the simulated image leaves out (vLLM's CPU build runs without it: H7 unmeasured).
    assert verdicts["R1"]["verdict"] == "holds" and "Ray 2." in verdicts["R1"]["figure"], verdicts["R1"]
    assert verdicts["N7"]["verdict"] == "holds" and "the engine loads NCCL 2.31.2" in verdicts["N7"]["figure"], verdicts["N7"]
    assert verdicts["H7"]["verdict"] == "not measured" and "triton" in verdicts["H7"]["figure"], verdicts["H7"]
    assert report["nodes"][head]["serving"]["probe"]["nccl"]["kind"] == "system", report["nodes"][head]["serving"]
    # The engine's last start by phase, from its log, within the wait the deploy gives it (V7).
    assert verdicts["V7"]["verdict"] == "holds" and "within the deploy's wait of" in verdicts["V7"]["figure"], verdicts["V7"]
    start = report["nodes"][head]["serving"]["start"]
    assert 0 < start["ready_after_s"] < 600 and start["weights_s"] >= 0 and start["engine_init_s"] > 0, start
    # Each ConnectX-7 function's PCIe link (a simulated Spark has the cable port's two twins): the
    # head's at x4, the worker's narrowed endpoint named.
    assert "%s 200000 Mb/s MTU 9000, PCIe x4 on 2 functions," % head in verdicts["N5"]["figure"], verdicts["N5"]
    assert ("%s 200000 Mb/s MTU 9000, PCIe x2/x4 on 2 functions (roceP2p1s0f1 narrower than the card: x2 of x4)"
            % worker) in verdicts["N5"]["figure"], verdicts["N5"]
    # A short benchmark through the front door, from the controller, with the client key.
    bench = report["nodes"][head]["serving"]["benchmark"]
    # (the endpoint's address redacted, as every address is unless report_addresses is true)
    assert bench["endpoint"] == "https://<address>:%d/v1" % API_PORT, bench
    assert [level["concurrency"] for level in bench["levels"]] == [1] and bench["levels"][0]["output_tokens"] >= 16, bench
    assert "## A short benchmark through the front door" in page
    # Each node without its engine: the clean reading its baseline was made from, before the deploy's launch.
    assert all(report["nodes"][h]["memory"]["baseline"]["reading"]["cuda_free_gib"]
               > report["nodes"][h]["memory"]["cuda_free_gib"] + 80 for h in sim_cluster.hosts), report["nodes"]
    assert "memory without the engine (the clean reading of" in page
    # Addresses are left out unless asked for.
    assert sim_cluster.cluster_ips[head] not in json.dumps(report)
    # The loop closes: the worker becomes the node the report measured (its cache, services, driver).
    subprocess.run(["docker", "exec", "-i", worker, "sh", "-c", "cat > /var/tmp/report.json"], check=True, timeout=60,
                   input=(tmp_path / "reports" / ("%s.report.json" % head)).read_bytes())
    on_host(worker, "/opt/gb10-sim/bin/gb10-sim-from-report", "/var/tmp/report.json", worker)
    state = dict(line.split("=", 1) for line in on_host(worker, "cat", "/var/lib/gb10-sim/state").split())
    measured = report["nodes"][worker]["memory"]
    assert abs(float(state["cache_gib"]) - measured["reclaimable_gib"]) < 0.01, (state, measured)
    assert state["driver_version"] == report["nodes"][worker]["driver_version"], state
    assert abs(float(state["services_gib"]) - measured["processes_gib"]) < 0.01, (state, measured)
    assert (state["pcie_width_p1"], state["pcie_width_p2"]) == ("4", "2"), state
    on_host(worker, "gb10-sim-set", "pcie_width_p2=4")


def status_of(result, head):
    """(screen lines, the JSON document) of a status.yml run, the file found where the screen says."""
    screen = result.results_by_host(task=STATUS_TASK)[head]["msg"]
    written = [line for line in screen if line.startswith("Written to ")]
    assert len(written) == 1, screen
    with open(written[0][len("Written to "):]) as handle:
        return screen, json.load(handle)


@pytest.mark.rule("O6", "A1")
def test_status_shows_the_serving_cluster_in_one_screen_and_changes_nothing(sim_cluster, deployed, run_playbook):
    # playbooks/status.yml with no -e: the launch the head recorded. Read-only (the same node
    # state, changed=0), each node's memory as the module splits it, the engine's hold on the
    # serving nodes, the link figures, the keys by fingerprint only.
    head, worker = sim_cluster.hosts
    before = {h: node_state(h) for h in sim_cluster.hosts}
    result = run_playbook("playbooks/status.yml", sim_cluster.inventory, timeout=600)
    assert_succeeded(result, sim_cluster.hosts)
    assert all(stats["changed"] == 0 for stats in result.stats.values()), result.stats
    assert {h: node_state(h) for h in sim_cluster.hosts} == before
    screen, status = status_of(result, head)

    assert screen[0].startswith("SERVING: ") and status["serving"] and status["fix"] is None, screen
    assert status["launch"]["profile"] == PROFILE and status["launch"]["overlay"] == "sim-cpu", status["launch"]
    assert status["launch"]["nodes"] == list(sim_cluster.hosts) and status["launch"]["tp"] == 2
    assert status["endpoint"] == "https://%s:%d/v1" % (sim_cluster.ips[head], API_PORT), status["endpoint"]
    image_id = on_host(head, "docker", "image", "inspect", "--format", "{{.Id}}", sim_cluster.image_name).strip()
    assert status["image"]["id"] == image_id and status["image"]["versions"], status["image"]
    for host in sim_cluster.hosts:
        node = status["nodes"][host]
        memory = node["figures"]["memory"]
        # Each node holds its engine's share of the pool (0.82 x 119.7 GiB): the engine, not a leak.
        assert memory["total_gib"] == 119.7 and memory["engine_gib"] > 80 and memory["leaked"] is False, (host, node)
        assert node["figures"]["link"]["ok"] is True and node["firewall"] == "loaded", (host, node)
        assert node["container"].endswith(" running"), (host, node)
    # A key's fingerprint, never the key.
    key = api_key(head)
    assert status["keys"]["default"] == hashlib.sha256(key.encode()).hexdigest()[:12], status["keys"]
    assert key not in json.dumps(status) and key not in run_text(result)


@pytest.mark.rule("N1", "N5", "R1")
def test_the_run_measured_the_link_before_the_launch(sim_cluster, deployed):
    # N5: a clean launch measures the link with the engine's image and env file (Gloo
    # over the cluster interface here) and prints the figures; the JSON report holds every node's.
    summary = deployed.results_by_host(task=SUMMARY_TASK)[sim_cluster.head]["msg"]
    lines = [line for line in summary if line.startswith("Link check (N5): ")]
    assert len(lines) == 1, summary
    busbw, tcp, report_path = link_figures(lines[0])
    assert set(busbw) == set(sim_cluster.hosts) and tcp and report_path, lines
    with open(report_path) as f:
        report = json.load(f)
    nodes = {node["host"]: node for node in report["nodes"]}
    assert set(nodes) == set(sim_cluster.hosts) and report["transport"] == "roce", report
    for host, node in nodes.items():
        assert node["problems"] == [] and node["backend"] == "gloo", node
        # Above the floor and the share of plain TCP that inventory/group_vars/gb10_sim.yml sets.
        assert node["busbw_gbit"] >= node["floor_gbit"] and busbw[host] == node["busbw_gbit"], node
        assert node["busbw_gbit"] >= node["tcp_share"] * tcp > 0, (node, tcp)
    # After the launch the deploy read the engine's log for NCCL's choice: each rank took
    # IB over both twins' HCAs (the simulation's NCCL stand-in: the Ray containers reach the RDMA
    # devices with IPC_LOCK).
    line = next(line for line in summary if line.startswith("NCCL in the engine (N5): "))
    assert "2 NCCL process(es)" in line and line.count("NET/IB over roceP2p1s0f1, rocep1s0f1") == 2, line


IMAGE_SUMMARY_TASK = "Summary (per node, had / pulled / built / copied, bytes, seconds, MB/s, layers left out)"


@pytest.mark.rule("N3")
def test_the_deploy_configured_the_link_from_a_fresh_port(sim_cluster, deployed):
    # The hosts came up with the CX7 port up and without an address (test_1); the deploy
    # gave each its gb10_cluster_ip at MTU 9000 through its own netplan file, and the nodes trust
    # each other's cluster key over the link only. Both twins of the cable, each on its
    # own subnet (pair mode, the default): the twin got the same host part in the next subnet,
    # the address the simulation's second link network reserved for it (Docker drops any other).
    for host in sim_cluster.hosts:
        netplan = yaml.safe_load(on_host(host, "cat", NETPLAN_FILE))
        for port, address in ((sim_cluster.link_port, sim_cluster.cluster_ips[host]),
                              (sim_cluster.twin_port, sim_cluster.twin_ips[host])):
            assert link_state(host, port) == (["%s/24" % address], 9000), (host, port)
            assert netplan["network"]["ethernets"][port]["addresses"] == ["%s/24" % address], netplan
        peers = [h for h in sim_cluster.hosts if h != host]
        keys = on_host(host, "cat", "/root/.ssh/authorized_keys")
        for peer in peers:
            # The peer's key, from its addresses on the link only: either twin (pair mode).
            line = next(line for line in keys.splitlines() if "gb10-cluster@%s" % peer in line)
            assert 'from="%s,%s"' % (sim_cluster.cluster_ips[peer], sim_cluster.twin_ips[peer]) in line, line
            assert "restrict" in line, line


def test_the_deploy_copied_the_serving_image_over_the_link(sim_cluster, deployed):
    # The head held the image (as where it was built); the worker held an earlier build, every layer
    # but the simulation's shims (tests/sim/cluster.py, EARLIER_BUILD_HOLDERS). It got the same
    # image ID from the head, streamed to its cluster address, and the stream left out the layers it
    # held: the bytes on the wire are the shims' few layers and the image's metadata,
    # not the 3.5 GB image; the run said how much, how fast and how many layers it left out.
    head, worker = sim_cluster.hosts
    ids = {h: on_host(h, "docker", "image", "inspect", "--format", "{{.Id}}", sim_cluster.image_name).strip()
           for h in sim_cluster.hosts}
    assert ids[worker] == ids[head], ids
    layers = json.loads(on_host(head, "docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}",
                                sim_cluster.image_name))
    earlier = json.loads(on_host(worker, "docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}",
                                 sim_cluster.serving_image + "-engine"))
    assert layers[:len(earlier)] == earlier and len(layers) > len(earlier), (layers, earlier)
    image_bytes = int(on_host(head, "docker", "image", "inspect", "--format", "{{.Size}}", sim_cluster.image_name))
    results = deployed.results_by_host(task="What this node got, for the summary and the callers")
    got = {h: r["ansible_facts"]["serving_image_result"] for h, r in results.items()}
    assert got[head]["action"] == "had" and got[worker]["action"] == "copied", got
    assert got[worker]["source"] == head and got[worker]["layers_left_out"] == len(earlier), got
    # The shims' layers are ~20 KB and a docker save's metadata (configs, tar headers) tens of KB.
    assert 0 < int(got[worker]["bytes"]) < 10**6 < image_bytes, (got, image_bytes)
    assert not got[worker]["whole_image_after"], got
    plan = deployed.results_by_host(task="Plan for the whole group (refuses before anything changes)")[head]
    assert plan["targets_ip"] == {worker: sim_cluster.cluster_ips[worker]}, plan
    assert plan["targets_layers"] == {worker: len(earlier)}, plan
    line = next(line for line in deployed.results_by_host(task=IMAGE_SUMMARY_TASK)[head]["msg"] if line.startswith(worker))
    assert "copied %s" % sim_cluster.image_name in line and "MB/s" in line, line
    assert "%d layer(s) it held left out" % len(earlier) in line, line


@pytest.mark.rule("N7")
def test_the_image_step_read_the_nccl_the_engine_loads(sim_cluster, deployed):
    # The image step asked the serving image on the head, before the copy, which NCCL the engine
    # loads: the simulated image carries the fixture kit's stand-in as its system libnccl.so.2
    # (NCCL 2.31.2, as a GB10 vLLM image ran it; vLLM's CPU build has none), and its runtime version and file are read from the
    # library itself (ncclGetVersion, /proc/self/maps), not from a constant of the build.
    head = sim_cluster.hosts[0]
    verdict = deployed.results_by_host(task="Judge the image from its answers")[head]["ansible_facts"]["serving_image_verdict"]
    nccl = verdict["probe"]["nccl"]
    assert nccl["version"] == 23102 and nccl["kind"] == "system", verdict
    assert re.match(r"^/usr/lib/[a-z0-9_]+-linux-gnu/libnccl\.so\.2$", nccl["path"]), verdict
    assert verdict["refusals"] == [] and verdict["probe"]["nccl_conf"] == [], verdict
    summary = deployed.results_by_host(task=IMAGE_SUMMARY_TASK)[head]["msg"]
    assert any(line.startswith("what the image runs (asked on %s): Ray 2.60.0; the engine loads NCCL 2.31.2 (" % head)
               for line in summary), summary


def test_every_container_runs_by_image_id_and_no_peer_loads_an_image_after_the_copy(sim_cluster, deployed):
    # A peer that could load an image could re-point the serving tag on every node. The
    # collection's containers run by the image ID the tag named when they were made, and the
    # worker's gate, which took the copy above, takes no docker load once the copy ended.
    head, worker = sim_cluster.hosts
    image_id = on_host(head, "docker", "image", "inspect", "--format", "{{.Id}}", sim_cluster.image_name).strip()
    for host in sim_cluster.hosts:
        names = on_host(host, "docker", "ps", "--filter", "label=gb10.serving/role", "--format", "{{.Names}}").split()
        assert len(names) >= 2, (host, names)  # its Ray container and its metrics exporter
        for name in names:
            image = on_host(host, "docker", "inspect", "--format",
                            "{{.Config.Image}} {{index .Config.Labels \"gb10.serving/image\"}}", name).split()
            assert image == [image_id, sim_cluster.image_name], (host, name, image)
    load = subprocess.run(["docker", "exec", head, "/usr/local/sbin/gb10-cluster-ssh", sim_cluster.cluster_ips[worker],
                           "docker", "load"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                          check=False)
    assert load.returncode == 126 and "window" in load.stderr, load


@pytest.mark.rule("N3")
def test_nothing_but_ssh_and_the_api_crosses_the_management_network(sim_cluster, deployed):
    # Ray, Gloo and the copies use the cluster link: between the nodes' management addresses no
    # connection is open, and the worker's Ray reaches the head's GCS on its cluster address.
    head, worker = sim_cluster.hosts
    out = on_host(worker, "ss", "-Htn", "state", "established")
    peers = [line.split()[-1].rsplit(":", 1) for line in out.splitlines() if line.strip()]
    # A node with IPv6 (the simulated management network has it, as a Spark's LAN does) runs Ray's
    # servers on dual-stack sockets: an IPv4 peer shows as [::ffff:a.b.c.d].
    peers = [[re.sub(r"^\[(?:::ffff:)?|\]$", "", address), port] for address, port in peers]
    assert [p for p in peers if p[0] == sim_cluster.ips[head]] == [], out
    assert [sim_cluster.cluster_ips[head], "6379"] in peers, out


@pytest.mark.rule("H10")
def test_every_node_runs_earlyoom_with_the_engine_first_below_what_the_serving_node_has(sim_cluster, deployed):
    # H10: a node out of unified memory ends its engine instead of freezing, and a healthy serving
    # node is never the trigger: the threshold (from the profile's fit, molecule/oom_guard checks
    # the figure; the choice of victim is its real earlyoom in dry run) is below what the simulated
    # Spark has available while it serves.
    for host in sim_cluster.hosts:
        args = on_host(host, "sh", "-c", "tr '\\0' ' ' < /proc/$(pgrep -xo earlyoom)/cmdline")
        assert "--prefer ^(vllm|VLLM::.*|ray::.*|sglang.*)$" in args, (host, args)
        threshold_kib = int(re.search(r"-M ([0-9]+) ", args).group(1))
        meminfo = on_host(host, "cat", "/var/lib/gb10-sim/proc/meminfo")
        available_kib = int(re.search(r"MemAvailable:\s+([0-9]+) kB", meminfo).group(1))
        assert 1024 ** 2 <= threshold_kib < available_kib, (host, args, meminfo)


@pytest.mark.rule("N3", "R1", "R5")
def test_ray_sees_two_nodes_with_one_gpu_each(sim_cluster, deployed):
    # Ray's own Python API inside the head container, as a driver of the cluster (R5).
    out = on_host(sim_cluster.head, "docker", "exec", HEAD, "python3", "-c",
                  "import json, ray; ray.init(address='auto', logging_level='ERROR'); "
                  "print(json.dumps([{'alive': n['Alive'], 'ip': n['NodeManagerAddress'], "
                  "'gpus': n['Resources'].get('GPU', 0)} for n in ray.nodes()]))")
    nodes = [n for n in json.loads(out.strip().splitlines()[-1]) if n["alive"]]
    # Every node registered with its cluster link address (serving_containers_node_ip), not its management one.
    assert sorted(n["ip"] for n in nodes) == sorted(sim_cluster.cluster_ips.values())
    assert [n["gpus"] for n in nodes] == [1.0] * len(sim_cluster.hosts)


TOKEN_FILE = "/etc/gb10/ray-auth/token"  # serving_containers_auth_token_file's default


@pytest.mark.rule("A3")
def test_ray_refuses_a_client_without_the_clusters_token(sim_cluster, deployed):
    # A3: a cluster-link peer, or the model's code in a container, reaches the head's
    # GCS port; without the cluster's token Ray refuses it. Asked from the worker's Ray container
    # (on the link, with Ray installed) without a token (a wrong one meets the same check: Ray's
    # "missing or incorrect"); with the container's own setting (the token's file) it is a driver.
    head, worker = sim_cluster.hosts
    tokens = {host: on_host(host, "cat", TOKEN_FILE) for host in sim_cluster.hosts}
    assert len(set(tokens.values())) == 1 and len(tokens[head]) >= 32, "one token for the cluster"
    for host in sim_cluster.hosts:
        assert on_host(host, "stat", "-c", "%a %U", TOKEN_FILE).split() == ["600", "root"]
        # Only the file's path is in the containers' environment, never the token.
        config = on_host(host, "docker", "inspect", "--format", "{{json .Config.Env}}",
                         HEAD if host == head else WORKER)
        assert tokens[head] not in config and "RAY_AUTH_TOKEN_PATH=%s" % TOKEN_FILE in config, config
    driver = ("import ray; ray.init(address='%s:6379', logging_level='ERROR'); "
              "print('nodes', len([n for n in ray.nodes() if n['Alive']]))" % sim_cluster.cluster_ips[head])

    def ask(*env):
        settings = [a for e in env for a in ("-e", e)]
        argv = ["docker", "exec", worker, "docker", "exec"] + settings + [WORKER, "timeout", "90", "python3", "-c", driver]
        return subprocess.run(argv, capture_output=True, text=True, timeout=150, check=False)

    member = ask()
    assert member.returncode == 0 and "nodes %d" % len(sim_cluster.hosts) in member.stdout, member
    stranger = ask("RAY_AUTH_MODE=disabled", "RAY_AUTH_TOKEN_PATH=")
    assert stranger.returncode != 0 and "nodes" not in stranger.stdout, stranger
    assert "Unauthenticated" in stranger.stderr and "InvalidAuthToken" in stranger.stderr, stranger.stderr[-2000:]


@pytest.mark.rule("R1")
def test_engine_runs_inside_the_ray_head_container(sim_cluster, deployed):
    # R1: `vllm serve` is a process of the head container with TP over Ray, not a ray:// client.
    unused_pid, unused_start, argv = engine_process(sim_cluster.head)
    assert "serve" in argv and any(a.endswith("/vllm") or a == "vllm" for a in argv), argv
    assert argv[argv.index("--tensor-parallel-size") + 1] == str(TP)
    assert argv[argv.index("--distributed-executor-backend") + 1] == "ray"
    assert not any(a.startswith("ray://") for a in argv)
    # The workers' containers run Ray only; their node hosts the second rank.
    for host in sim_cluster.hosts[1:]:
        assert on_host(host, "docker", "inspect", "--format", "{{.State.Running}}", WORKER).strip() == "true"


@pytest.mark.rule("V7")
def test_the_compile_caches_live_on_the_node_across_container_recreation(sim_cluster, deployed):
    # V7: vLLM's, FlashInfer's, Triton's and torch inductor's caches are the node's folders, so a
    # recreated Ray container starts warm; the engine wrote vLLM's there, and the kernels torch
    # built for the smoke test's first request went to inductor's (not the container's /tmp). The
    # folders are this image's and this model's: another model's code writes elsewhere.
    image_id = on_host(sim_cluster.head, "docker", "image", "inspect", "--format", "{{.Id}}", sim_cluster.image_name)
    cache = "/var/lib/gb10-serving/compile-cache/%s/%s-%s" % (  # serving_containers_cache_dir, then image and model
        image_id.strip().replace("sha256:", "")[:12], os.path.basename(sim_cluster.model_path),
        hashlib.sha1(sim_cluster.model_path.encode()).hexdigest()[:8])
    for host in sim_cluster.hosts:
        name = HEAD if host == sim_cluster.head else WORKER
        mounts = json.loads(on_host(host, "docker", "inspect", "--format", "{{json .Mounts}}", name))
        assert {(m["Source"], m["Destination"]) for m in mounts} >= {
            (cache + "/vllm", "/root/.cache/vllm"), (cache + "/flashinfer", "/root/.cache/flashinfer"),
            (cache + "/triton", "/root/.triton"), (cache + "/torchinductor", "/root/.cache/torchinductor")}, mounts
    assert on_host(sim_cluster.head, "ls", "-A", cache + "/vllm").split(), "vLLM wrote nothing in its cache"
    assert on_host(sim_cluster.head, "ls", "-A", cache + "/torchinductor").split(), "torch built nothing into its cache"


@pytest.mark.rule("V8", "A1")
def test_openai_client_gets_a_chat_answer(sim_cluster, deployed):
    client = api_client(sim_cluster)
    model = client.models.list().data[0].id
    answer = client.chat.completions.create(
        model=model, max_tokens=512,
        messages=[{"role": "user", "content": "Name three colours."}])
    choice = answer.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content or choice.message.tool_calls, answer
    assert choice.finish_reason in ("stop", "length")
    assert answer.usage.completion_tokens > 0


@pytest.mark.rule("A1")
def test_agent_clients_answer_through_the_printed_endpoint_and_stream_token_by_token(sim_cluster, deployed):
    # The APIs agents call, through the gateway with the key: OpenAI's Responses (Codex-style agents,
    # the Agents SDK) and Anthropic's Messages (Claude-Code-style agents), as each vendor's own SDK
    # sends them; and a chat answer streamed as it is made, not in one piece at the end.
    import anthropic
    client = api_client(sim_cluster)
    model = client.models.list().data[0].id
    response = client.responses.create(model=model, input="Hello", max_output_tokens=16, temperature=0)
    assert response.output_text.strip() and response.usage.output_tokens > 0, response
    head = sim_cluster.head
    agent = anthropic.Anthropic(base_url="https://%s:%d" % (sim_cluster.ips[head], API_PORT), api_key=api_key(head),
                                timeout=300, max_retries=0, http_client=anthropic.DefaultHttpxClient(
                                    verify=ssl.create_default_context(cafile=gateway_ca(head))))
    message = agent.messages.create(model=model, max_tokens=16,
                                    messages=[{"role": "user", "content": "Hello"}])
    assert message.content[0].text.strip() and message.usage.output_tokens > 0, message
    assert agent.messages.count_tokens(model=model, messages=[{"role": "user", "content": "Hello"}]).input_tokens > 0
    chunks = [chunk.choices[0].delta.content for chunk in client.chat.completions.create(
        model=model, max_tokens=16, temperature=0, stream=True, messages=[{"role": "user", "content": "Hello"}])
        if chunk.choices and chunk.choices[0].delta.content]
    assert len(chunks) > 1 and TINY_ANSWER.strip() in "".join(chunks), chunks


@pytest.mark.rule("A7")
def test_one_request_asking_more_than_eight_choices_or_prompts_is_refused_by_the_engine(sim_cluster, deployed):
    # Through the gateway with a key: the engine itself refuses what one request may not ask (n, a
    # prompt list), naming vLLM's own limit, before any token is made; eight of each still answer.
    client = api_client(sim_cluster)
    model = client.models.list().data[0].id
    with pytest.raises(openai.BadRequestError, match="must be at most 8, got 9.*VLLM_MAX_N_SEQUENCES"):
        client.chat.completions.create(model=model, n=9, max_tokens=1, messages=[{"role": "user", "content": "Hi"}])
    with pytest.raises(openai.BadRequestError, match="prompt list length 9 exceeds the maximum allowed count of 8"):
        client.completions.create(model=model, prompt=["Hi"] * 9, max_tokens=1)
    assert len(client.completions.create(model=model, prompt=["Hi"] * 8, max_tokens=1).choices) == 8


@pytest.mark.rule("A1")
def test_the_printed_curl_answers_when_pasted(sim_cluster, deployed):
    # The summary's "Try it" command, as a user pastes it into a shell on the controller: over TLS
    # with the cluster CA it names, the key read from the file the summary names (A1).
    summary = deployed.results_by_host(task=SUMMARY_TASK)[sim_cluster.head]["msg"]
    tries = [line[len("Try it: "):] for line in summary if line.startswith("Try it: ")]
    assert len(tries) == 1, summary
    pasted = subprocess.run(["bash", "-c", tries[0]], capture_output=True, text=True, timeout=300, check=False)
    assert pasted.returncode == 0, (tries[0], pasted.stderr)
    answer = json.loads(pasted.stdout)
    assert answer["object"] == "chat.completion" and answer["usage"]["completion_tokens"] > 0, answer


def test_the_endpoint_refuses_a_request_without_the_key(sim_cluster, deployed):
    client = api_client(sim_cluster, key="wrong-key", timeout=60)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()


def test_the_benchmark_playbook_measures_the_endpoint_from_the_controller(serving, run_playbook, tmp_path):
    # playbooks/benchmark.yml as an operator runs it after a deploy (small sizes: the path, not the
    # speed): its requests go from the controller to the address the deploy summary prints, and
    # its JSON lands with the controller's logs, not in the folder it was run from.
    sim_cluster = serving
    # An earlier run of the profile in the logs folder: the new one compares each level with it.
    (tmp_path / "logs").mkdir()
    earlier = tmp_path / "logs" / "benchmark-minimax-m27-nvfp4-20261201T000000Z.json"
    earlier.write_text(json.dumps({"levels": [{"concurrency": 1, "output_tok_per_s": 1.5, "mean_ttft_s": 9.0}]}))
    result = run_playbook("playbooks/benchmark.yml", sim_cluster.inventory, timeout=900, extravars={
        "gb10_profile": "minimax-m27-nvfp4", "gb10_logs_dir": str(tmp_path / "logs"),
        "benchmark_prefill_tokens": 64, "benchmark_generate_tokens": 8, "benchmark_concurrency": [1, 2],
        "benchmark_requests_per_level": 2})

    assert_succeeded(result, [sim_cluster.head])
    table = result.results_by_host(task="Show the table")[sim_cluster.head]["msg"]
    written = [line.split("json: ", 1)[1] for line in table if line.startswith("json: ")]
    assert len(written) == 1 and written[0].startswith(str(tmp_path / "logs") + "/benchmark-minimax-m27-nvfp4-"), table
    with open(written[0]) as f:
        report = json.load(f)
    assert report["endpoint"] == "https://%s:%d/v1" % (sim_cluster.ips[sim_cluster.head], API_PORT), report
    assert [level["concurrency"] for level in report["levels"]] == [1, 2], report
    assert all(level["output_tokens"] >= 8 * level["requests"] for level in report["levels"]), report
    # Each level's spread, as the field's tools report it: p50 <= p90 <= p99 of TTFT and TPOT.
    assert all(level[key]["p50"] <= level[key]["p90"] <= level[key]["p99"]
               for level in report["levels"] for key in ("ttft_s", "tpot_ms")), report
    assert [(c["concurrency"], c["tok_per_s_before"]) for c in report["change"]] == [(1, 1.5)], report
    assert any(line.startswith("against %s at concurrency 1: 1.50 -> " % earlier) for line in table), table
    # The run drawn beside the earlier one, next to its JSON (the controller has matplotlib here).
    png = written[0][:-len(".json")] + ".png"
    assert "png: %s" % png in table, table
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_fields_own_benchmark_client_measures_the_endpoint_as_owners_run_it(serving, run_playbook, tmp_path):
    # benchmark_tool=llama-benchy: the client owners' published tables come from (PyPI llama-benchy),
    # run by the playbook from the controller through the front door with the client key and the
    # cluster CA. Its prompts are cut from a book with the model's own tokenizer: here the tiny
    # model's tokenizer.json, read from the head, and a text served on the controller's loopback
    # (no hub, no Gutenberg from this machine); the tiny model cannot name Paris, so its coherence
    # question is off.
    sim_cluster = serving
    tokenizer = tmp_path / "tokenizer"
    tokenizer.mkdir()
    (tokenizer / "tokenizer.json").write_text(on_host(sim_cluster.head, "cat", sim_cluster.model_path + "/tokenizer.json"))
    book = tmp_path / "book"
    book.mkdir()
    with open(os.path.join(TOP, "COPYING")) as f:
        (book / "book.txt").write_text(f.read())
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(book)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/book.txt" % server.server_address[1]
    # llama-benchy keeps each book it fetched under ~/.cache/llama-benchy, named after the URL's md5.
    cached = os.path.join(os.path.expanduser("~"), ".cache", "llama-benchy", hashlib.md5(url.encode()).hexdigest() + ".txt")
    try:
        result = run_playbook("playbooks/benchmark.yml", sim_cluster.inventory, timeout=900, extravars={
            "gb10_profile": "minimax-m27-nvfp4", "gb10_logs_dir": str(tmp_path / "logs"),
            "benchmark_tool": "llama-benchy", "benchmark_tokenizer": str(tokenizer), "benchmark_book_url": url,
            "benchmark_coherence": False, "benchmark_runs": 1,
            "benchmark_prefill_tokens": 64, "benchmark_generate_tokens": 8, "benchmark_concurrency": [1, 2]})
    finally:
        server.shutdown()
        if os.path.exists(cached):
            os.remove(cached)

    assert_succeeded(result, [sim_cluster.head])
    lines = result.results_by_host(task="Show llama-benchy's figures as its tables give them")[sim_cluster.head]["msg"]
    written = lines[-1].split("JSON: ", 1)[1]
    assert written.startswith(str(tmp_path / "logs") + "/llama-benchy-minimax-m27-nvfp4-"), lines
    with open(written) as f:
        report = json.load(f)
    # llama-benchy's own report: one run per concurrency, prefill and generation throughput measured.
    assert report["max_concurrency"] == 2 and report["latency_mode"] == "api", report
    runs = {run["concurrency"]: run for run in report["benchmarks"]}
    assert sorted(runs) == [1, 2], report
    for run in runs.values():
        assert run["prompt_size"] == 64 and run["response_size"] == 8, run
        assert run["tg_throughput"]["mean"] > 0 and run["pp_throughput"]["mean"] > 0, run
    assert [line.split(" ", 1)[0] for line in lines[:-1]] == ["c1", "c2"], lines
    assert all(" t/s, tg8 " in line for line in lines[:-1]), lines
