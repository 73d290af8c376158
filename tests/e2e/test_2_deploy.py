# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/deploy-m27.yml on the simulated 2-Spark cluster (TP=2), checked as a user would:
the playbook succeeds, Ray inside the head container sees two nodes with one GPU each (R5), the
engine runs inside the Ray head container (R1), the OpenAI Python client gets a chat answer from
the endpoint, and a second run reports changed=0 and keeps the same containers and engine process
(O2).
"""

import argparse
import glob
import json
import os
import re
import shlex
import subprocess
import xml.etree.ElementTree as ET

import openai
import pytest
import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = "playbooks/deploy-m27.yml"
HEAD = "gb10-ray-head"
WORKER = "gb10-ray-worker"
PORT = 8000  # serve.port of profiles/minimax-m27-nvfp4.yml
TP = 2


def on_host(host, *argv):
    """Run a command in a simulated Spark (a container of this machine's Docker)."""
    proc = subprocess.run(["docker", "exec", host] + list(argv), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
    return proc.stdout


def container_id(host, name):
    return on_host(host, "docker", "inspect", "--format", "{{.Id}}", name).strip()


def engine_process(head):
    """(pid, start time in clock ticks, argv) of the engine inside the head container."""
    out = on_host(head, "docker", "exec", HEAD, "sh", "-c",
                  'pid=$(cat /var/lib/gb10-engine/pid); echo "$pid"; cut -d" " -f22 /proc/$pid/stat; '
                  'tr "\\0" "\\n" < /proc/$pid/cmdline')
    lines = out.splitlines()
    return lines[0], lines[1], lines[2:]


def api_key(head):
    # The api_key role keeps a generated key on the controller, named after the head.
    path = os.path.expanduser("~/.config/gb10-serving/%s.api-key" % head)
    with open(path) as f:
        return f.read().strip()


def assert_succeeded(result, hosts):
    assert result.status == "successful", result
    for host in hosts:
        assert result.stats[host]["failed"] == 0 and result.stats[host]["unreachable"] == 0, result


@pytest.fixture(scope="module")
def deployed(sim_cluster, run_playbook):
    result = run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=3000)
    assert_succeeded(result, sim_cluster.hosts)
    return result


def test_the_run_ends_with_the_endpoint_and_the_answer_it_received(sim_cluster, deployed):
    head = sim_cluster.head
    summary = deployed.results_by_host(task="Show the endpoint")[head]["msg"]
    assert "Endpoint: http://%s:%d/v1 (OpenAI API)" % (sim_cluster.ips[head], PORT) in " ".join(summary), summary
    chat = deployed.results_by_host(task="Send a chat request with a tool definition and max_tokens >= 512")[head]
    message = chat["json"]["choices"][0]["message"]
    answered = [line for line in summary if line.startswith("Smoke test (V8) answered: ")]
    assert len(answered) == 1, summary
    said = answered[0][len("Smoke test (V8) answered: "):]
    assert said and (said[:40] == (message.get("content") or "").strip()[:40] or message.get("tool_calls")), (said, message)


def link_figures(line):
    """{host: busbw Gb/s}, the TCP figure and the report path of a link check summary line."""
    busbw = {host: float(gbit) for host, gbit in re.findall(r"(\S+) ([0-9.]+) Gb/s(?:,| all-reduce)", line)}
    tcp = re.search(r"plain TCP to rank 0 between the cluster addresses: ([0-9.]+) Gb/s", line)
    report = re.search(r"Every figure: (\S+\.json)", line)
    return busbw, float(tcp.group(1)) if tcp else None, report.group(1) if report else None


def test_the_run_measured_the_link_before_the_launch(sim_cluster, deployed):
    # N5, issue 18: a clean launch measures the link with the engine's image and env file (Gloo
    # over the cluster interface here) and prints the figures; the JSON report holds every node's.
    summary = deployed.results_by_host(task="Show the endpoint")[sim_cluster.head]["msg"]
    lines = [line for line in summary if line.startswith("Link check (N5): ")]
    assert len(lines) == 1, summary
    busbw, tcp, report_path = link_figures(lines[0])
    assert set(busbw) == set(sim_cluster.hosts) and tcp and report_path, lines
    with open(report_path) as f:
        report = json.load(f)
    nodes = {node["host"]: node for node in report["nodes"]}
    assert set(nodes) == set(sim_cluster.hosts) and report["transport"] == "socket", report
    for host, node in nodes.items():
        assert node["problems"] == [] and node["backend"] == "gloo", node
        # Above the floor and the share of plain TCP that inventory/group_vars/gb10_sim.yml sets.
        assert node["busbw_gbit"] >= node["floor_gbit"] and busbw[host] == node["busbw_gbit"], node
        assert node["busbw_gbit"] >= node["tcp_share"] * tcp > 0, (node, tcp)
    # After the launch the deploy read the engine's log for NCCL's choice: the CPU build runs Gloo.
    assert "NCCL in the engine (N5): no NCCL init line in the engine's log since its start" in " ".join(summary)


NETPLAN_FILE = "/etc/netplan/60-gb10-cluster-link.yaml"  # cluster_link_netplan_dir/_file
IMAGE_SUMMARY_TASK = "Summary (per node, had / pulled / built / copied, bytes, seconds, MB/s)"


def link_state(host, port):
    """(IPv4 addresses with prefix, MTU) of the cluster link port on a simulated Spark."""
    out = on_host(host, "sh", "-c", "ip -o -4 addr show dev %s; cat /sys/class/net/%s/mtu" % (port, port))
    lines = out.splitlines()
    return [line.split()[3] for line in lines[:-1]], int(lines[-1])


def test_the_deploy_configured_the_link_from_a_fresh_port(sim_cluster, deployed):
    # Issue 17: the hosts came up with the CX7 port up and without an address (test_1); the deploy
    # gave each its gb10_cluster_ip at MTU 9000 through its own netplan file, and the nodes trust
    # each other's cluster key over the link only.
    for host in sim_cluster.hosts:
        assert link_state(host, sim_cluster.link_port) == (["%s/24" % sim_cluster.cluster_ips[host]], 9000), host
        netplan = yaml.safe_load(on_host(host, "cat", NETPLAN_FILE))
        assert netplan["network"]["ethernets"][sim_cluster.link_port]["addresses"] == [
            "%s/24" % sim_cluster.cluster_ips[host]], netplan
        peers = [h for h in sim_cluster.hosts if h != host]
        keys = on_host(host, "cat", "/root/.ssh/authorized_keys")
        for peer in peers:
            line = next(line for line in keys.splitlines() if "gb10-cluster@%s" % peer in line)
            assert 'from="%s"' % sim_cluster.cluster_ips[peer] in line and "restrict" in line, line


def test_the_deploy_copied_the_serving_image_over_the_link(sim_cluster, deployed):
    # The head held the image (as where it was built); the worker got the same image ID from it,
    # streamed to its cluster address, and the run said how much and how fast.
    head, worker = sim_cluster.hosts
    ids = {h: on_host(h, "docker", "image", "inspect", "--format", "{{.Id}}", sim_cluster.image_name).strip()
           for h in sim_cluster.hosts}
    assert ids[worker] == ids[head], ids
    results = deployed.results_by_host(task="What this node got, for the summary and the callers")
    got = {h: r["ansible_facts"]["serving_image_result"] for h, r in results.items()}
    assert got[head]["action"] == "had" and got[worker]["action"] == "copied", got
    assert got[worker]["source"] == head and int(got[worker]["bytes"]) > 100 * 10**6, got
    plan = deployed.results_by_host(task="Plan for the whole group (refuses before anything changes)")[head]
    assert plan["targets_ip"] == {worker: sim_cluster.cluster_ips[worker]}, plan
    line = next(line for line in deployed.results_by_host(task=IMAGE_SUMMARY_TASK)[head]["msg"] if line.startswith(worker))
    assert "copied %s" % sim_cluster.image_name in line and "MB/s" in line, line


def test_nothing_but_ssh_and_the_api_crosses_the_management_network(sim_cluster, deployed):
    # Ray, Gloo and the copies use the cluster link: between the nodes' management addresses no
    # connection is open, and the worker's Ray reaches the head's GCS on its cluster address.
    head, worker = sim_cluster.hosts
    out = on_host(worker, "ss", "-Htn", "state", "established")
    peers = [line.split()[-1].rsplit(":", 1) for line in out.splitlines() if line.strip()]
    assert [p for p in peers if p[0] == sim_cluster.ips[head]] == [], out
    assert [sim_cluster.cluster_ips[head], "6379"] in peers, out


def test_ray_sees_two_nodes_with_one_gpu_each(sim_cluster, deployed):
    # Ray's own Python API inside the head container, as a driver of the cluster (R5).
    out = on_host(sim_cluster.head, "docker", "exec", HEAD, "python3", "-c",
                  "import json, ray; ray.init(address='auto', logging_level='ERROR'); "
                  "print(json.dumps([{'alive': n['Alive'], 'ip': n['NodeManagerAddress'], "
                  "'gpus': n['Resources'].get('GPU', 0)} for n in ray.nodes()]))")
    nodes = [n for n in json.loads(out.strip().splitlines()[-1]) if n["alive"]]
    # Every node registered with its cluster link address (ray_cluster_node_ip), not its management one.
    assert sorted(n["ip"] for n in nodes) == sorted(sim_cluster.cluster_ips.values())
    assert [n["gpus"] for n in nodes] == [1.0] * len(sim_cluster.hosts)


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


def test_openai_client_gets_a_chat_answer(sim_cluster, deployed):
    client = openai.OpenAI(base_url="http://%s:%d/v1" % (sim_cluster.ips[sim_cluster.head], PORT),
                           api_key=api_key(sim_cluster.head), timeout=300, max_retries=0)
    model = client.models.list().data[0].id
    answer = client.chat.completions.create(
        model=model, max_tokens=512,
        messages=[{"role": "user", "content": "Name three colours."}])
    choice = answer.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content or choice.message.tool_calls, answer
    assert choice.finish_reason in ("stop", "length")
    assert answer.usage.completion_tokens > 0


def test_the_endpoint_refuses_a_request_without_the_key(sim_cluster, deployed):
    client = openai.OpenAI(base_url="http://%s:%d/v1" % (sim_cluster.ips[sim_cluster.head], PORT),
                           api_key="wrong-key", timeout=60, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()


def test_second_deploy_changes_nothing_and_keeps_the_engine(sim_cluster, deployed, run_playbook):
    before = {h: container_id(h, HEAD if h == sim_cluster.head else WORKER) for h in sim_cluster.hosts}
    engine_before = engine_process(sim_cluster.head)

    again = run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=1800)

    assert_succeeded(again, sim_cluster.hosts)
    assert {h: again.stats[h]["changed"] for h in sim_cluster.hosts} == {h: 0 for h in sim_cluster.hosts}, again
    # The serving engine holds the link: it is not measured again, and the summary says so.
    summary = again.results_by_host(task="Show the endpoint")[sim_cluster.head]["msg"]
    assert "Link check (N5): not measured: the engine keeps running" in " ".join(summary), summary
    after = {h: container_id(h, HEAD if h == sim_cluster.head else WORKER) for h in sim_cluster.hosts}
    assert after == before
    # Same pid and same start time: the very same engine process, not a restart (O2).
    assert engine_process(sim_cluster.head)[:2] == engine_before[:2]


# Drift (rule O3, issue 5): on the deployed cluster, drift.yml passes untouched; each mutation
# makes it fail naming the host and the rule, and the check-mode run changes nothing.
DRIFT = "playbooks/drift.yml"
OVERRIDE = "/etc/modprobe.d/zz-nvidia-drm-override.conf"


def drift(run_playbook, sim_cluster, **extravars):
    # Check mode: a "changed" result is a change the run would make, not one it made; each test
    # checks that its mutation is still in place afterwards.
    return run_playbook(DRIFT, sim_cluster.inventory, extravars=dict(gb10_profile="minimax-m27-nvfp4", **extravars),
                        check=True, timeout=900)


VERDICT = "Fail every host where a check found drift"


def findings(result):
    """{(host, rule)} of the failed drift checks, whose names end with their rule ID: each ignores
    its own failure so that the host's other checks still run, and drift.yml's verdict play then
    fails exactly the hosts that drifted. Any other failure is returned as (host, task name)."""
    found = set()
    for event in result.host_results(event="runner_on_failed"):
        rule = re.search(r"\(([A-Z][0-9]+)\)$", event.get("task") or "")
        if event.get("ignore_errors") and rule:
            found.add((event.get("host"), rule.group(1)))
    others = {(host, task) for host, task, _msg in result.failures() if task != VERDICT}
    verdict = {host for host, task, _msg in result.failures() if task == VERDICT}
    assert verdict == {host for host, _rule in found} - {host for host, _task in others}, result
    return found | others


def test_drift_passes_on_the_deployed_cluster(sim_cluster, deployed, run_playbook):
    result = drift(run_playbook, sim_cluster)
    assert result.status == "successful", result


def test_drift_measures_the_link_on_request(sim_cluster, deployed, run_playbook):
    # gb10_drift_link_check=true: the deploy's probe, beside the serving engine, as an N5 check of
    # every host; the engine keeps running.
    engine_before = engine_process(sim_cluster.head)
    result = drift(run_playbook, sim_cluster, gb10_drift_link_check=True)
    assert result.status == "successful", result
    measured = result.results_by_host(task="Refuse a slow or wrong wire, naming every node (N5)")
    busbw, tcp, unused_report = link_figures(measured[sim_cluster.head]["msg"])
    assert set(busbw) == set(sim_cluster.hosts) and tcp, measured
    assert engine_process(sim_cluster.head)[:2] == engine_before[:2]


def drift_job_commands(node, env=None):
    """(command, environment) of each drift.yml run in a CI job file, with the environment the job
    gives it (GitHub Actions: a step's env; GitLab CI: the job's variables)."""
    env = dict(env or {})
    if isinstance(node, dict):
        env.update(node.get("env") or {})
        env.update(node.get("variables") or {})
        for value in node.values():
            yield from drift_job_commands(value, env)
    elif isinstance(node, list):
        for value in node:
            yield from drift_job_commands(value, env)
    elif isinstance(node, str) and "ansible-playbook" in node and "drift.yml" in node:
        yield node, env


def ansible_playbook_args(command):
    """The job's ansible-playbook arguments; an option this test does not know fails it, so a
    changed job is looked at again."""
    parser = argparse.ArgumentParser()
    parser.add_argument("playbook")
    parser.add_argument("-i", dest="inventory", required=True)
    parser.add_argument("-e", dest="extra", action="append", default=[])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--diff", action="store_true")
    argv = shlex.split(command)
    assert os.path.basename(argv[0]) == "ansible-playbook", command
    args, unknown = parser.parse_known_args(argv[1:])
    assert not unknown, "%s: options this test does not know: %s" % (command, unknown)
    return args


@pytest.mark.parametrize("job", sorted(glob.glob(os.path.join(TOP, "docs", "ci", "*.yml"))), ids=os.path.basename)
def test_the_documented_ci_drift_job_passes_on_the_deployed_cluster(sim_cluster, deployed, run_playbook, tmp_path, job):
    # docs/ci/ is what users copy into their CI: its command must run as written, with the
    # inventory of the Sparks swapped for the simulated one, and publish the report it writes.
    with open(job) as f:
        text = f.read()
    commands = list(drift_job_commands(yaml.safe_load(text)))
    assert len(commands) == 1, commands
    command, env = commands[0]
    args = ansible_playbook_args(command)
    assert os.path.isfile(os.path.join(TOP, args.inventory)), args.inventory
    report_dir = env["GB10_DRIFT_REPORT_DIR"]
    published = "%s/drift-report.xml" % os.path.basename(report_dir)
    assert published in text, "the job must publish %s, where the callback writes its JUnit report" % published

    result = run_playbook(args.playbook, sim_cluster.inventory, check=args.check, diff=args.diff, timeout=900,
                          extravars=dict(kv.split("=", 1) for kv in args.extra),
                          envvars=dict(env, GB10_DRIFT_REPORT_DIR=str(tmp_path)))

    assert result.status == "successful", result
    cases = list(ET.parse(os.path.join(str(tmp_path), "drift-report.xml")).getroot().iter("testcase"))
    assert set(sim_cluster.hosts) <= {case.get("classname") for case in cases}, cases
    assert not [case for case in cases if case.find("failure") is not None]


def test_drift_names_an_override_file_that_came_back(sim_cluster, deployed, run_playbook):
    worker = sim_cluster.hosts[1]
    on_host(worker, "sh", "-c", "echo 'options nvidia-drm modeset=1' > " + OVERRIDE)
    try:
        result = drift(run_playbook, sim_cluster)
        assert result.status == "failed"
        assert findings(result) == {(worker, "H2")}, result
        on_host(worker, "test", "-f", OVERRIDE)  # check mode left it where it was
    finally:
        on_host(worker, "rm", "-f", OVERRIDE)


def test_drift_names_an_edited_env_file(sim_cluster, deployed, run_playbook):
    head = sim_cluster.head
    original = on_host(head, "cat", "/etc/gb10/nccl.env")
    on_host(head, "sh", "-c", "sed -i 's/^GLOO_SOCKET_IFNAME=.*/GLOO_SOCKET_IFNAME=lo/' /etc/gb10/nccl.env")
    try:
        result = drift(run_playbook, sim_cluster)
        assert result.status == "failed"
        # GLOO_SOCKET_IFNAME is a socket name on the cluster link (N3), one finding, no other.
        assert findings(result) == {(head, "N3")}, result
        assert "GLOO_SOCKET_IFNAME=lo" in on_host(head, "cat", "/etc/gb10/nccl.env")
    finally:
        subprocess.run(["docker", "exec", "-i", head, "sh", "-c", "cat > /etc/gb10/nccl.env"],
                       input=original, text=True, check=True, timeout=60)


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


def test_the_printed_drift_fix_runs_when_pasted(sim_cluster, deployed, tmp_path):
    # Issue 19: a hand-edited env file on one node; the report's fix is pasted as printed and
    # must run (the profile the drift run was given, --limit only where the playbook takes it).
    worker = sim_cluster.hosts[1]
    env = dict(user_env(tmp_path), GB10_DRIFT_REPORT_DIR=str(tmp_path / "report"))
    original = on_host(worker, "cat", "/etc/gb10/nccl.env")
    drift_command = ("ansible-playbook playbooks/drift.yml -i %s -e gb10_profile=minimax-m27-nvfp4 --check --diff"
                     % os.path.relpath(sim_cluster.inventory, TOP))
    on_host(worker, "sh", "-c", "sed -i 's/^GLOO_SOCKET_IFNAME=.*/GLOO_SOCKET_IFNAME=lo/' /etc/gb10/nccl.env")
    try:
        found = paste(drift_command, env, timeout=900)
        assert found.returncode != 0, found.stdout[-4000:]
        with open(str(tmp_path / "report" / "drift-report.json")) as f:
            report = json.load(f)
        # One finding per host and rule, under the variable's rule, naming the file on the host.
        assert [(f["host"], f["rule"]) for f in report["findings"]] == [(worker, "N3")], report
        finding = report["findings"][0]
        assert "GLOO_SOCKET_IFNAME=lo" in finding["summary"] and "ansible-local" not in json.dumps(report)
        cases = [(c.get("classname"), c.get("name"), c.find("failure") is not None)
                 for c in ET.parse(str(tmp_path / "report" / "drift-report.xml")).getroot().iter("testcase")]
        assert len(cases) == len({(h, r) for h, r, _failed in cases}), cases
        assert [(h, r) for h, r, failed in cases if failed] == [(worker, "N3")], cases
        assert {(h, r) for h, r, _failed in cases} >= {(h, r) for h in sim_cluster.hosts
                                                       for r in ("H1", "H2", "H4", "N1", "N2", "N3", "N4", "N6", "M3", "R2")}
        # What the summary printed is what the report holds; host prep on that node alone.
        assert "-- fix: %s" % finding["fix"] in found.stdout
        argv = shlex.split(finding["fix"])
        assert argv[:2] == ["ansible-playbook", "playbooks/host-prep.yml"], argv
        assert argv[argv.index("--limit") + 1] == worker and "--check" not in argv

        engine_before = engine_process(sim_cluster.head)
        fixed = paste(finding["fix"], env, timeout=900)

        assert fixed.returncode == 0, fixed.stdout[-4000:]
        assert on_host(worker, "cat", "/etc/gb10/nccl.env") == original
        # Nothing restarted: the engine is the same process and drift finds nothing now.
        assert engine_process(sim_cluster.head)[:2] == engine_before[:2]
        again = paste(drift_command, env, timeout=900)
        assert again.returncode == 0, again.stdout[-4000:]
    finally:
        subprocess.run(["docker", "exec", "-i", worker, "sh", "-c", "cat > /etc/gb10/nccl.env"],
                       input=original, text=True, check=True, timeout=60)


def test_drift_names_an_engine_started_with_other_flags(sim_cluster, deployed, run_playbook):
    head = sim_cluster.head
    script = "/var/lib/gb10-engine/running.sh"  # vllm_serve_state_dir (roles/vllm_serve/vars)
    # As if someone restarted the engine by hand with other flags: its launch id no longer matches.
    on_host(head, "docker", "exec", HEAD, "sed", "-i", "s/^# gb10-engine-id: /# gb10-engine-id: hand-/", script)
    try:
        result = drift(run_playbook, sim_cluster)
        assert result.status == "failed"
        assert findings(result) == {(head, "R1")}, result
    finally:
        on_host(head, "docker", "exec", HEAD, "sed", "-i", "s/^# gb10-engine-id: hand-/# gb10-engine-id: /", script)


ENGINE_LOG = "/var/lib/gb10-engine/engine.log"  # in vllm_serve_state_dir (roles/vllm_serve/vars)
# vllm_serve's rescue collects every node's logs (H9), then fails with what failed (roles/vllm_serve).
LOGS_TASK = "Fail with what went wrong and where the logs are"


def print_in_engine_log(head, capture):
    """Append a real NCCL init capture (tests/fixtures/nccl/, sources in its README) to the running
    engine's log, as its Ray workers print it on GPUs: the simulated engine runs Gloo."""
    with open(os.path.join(TOP, "tests", "fixtures", "nccl", capture)) as f:
        subprocess.run(["docker", "exec", "-i", head, "docker", "exec", "-i", HEAD, "sh", "-c", "cat >> " + ENGINE_LOG],
                       input=f.read(), text=True, check=True, timeout=60)


def test_nccl_in_the_engine_is_read_after_the_launch(sim_cluster, deployed, run_playbook):
    # N5 after the launch, issue 18: what NCCL took in the engine, read from its log since its start.
    head = sim_cluster.head
    size = on_host(head, "docker", "exec", HEAD, "stat", "-c", "%s", ENGINE_LOG).strip()
    engine_before = engine_process(head)
    try:
        # Sockets on eth0 (a real GPU machine's NCCL): the sim's transport, but eth0 is a simulated
        # Spark's management NIC, not its cluster port: the wrong wire of rule N5, named.
        print_in_engine_log(head, "device_h100_socket_profile.log")
        wrong = drift(run_playbook, sim_cluster)
        assert wrong.status == "failed" and findings(wrong) == {(head, "N5")}, wrong
        read = wrong.results_by_host(task="Tell which transport NCCL took in the engine")[head]
        assert read["ansible_facts"]["vllm_serve_nccl"]["ranks"] == ["vm pid 514 (rank 0): NET/Socket over eth0 (192.0.2.2)"]
        assert "not the cluster interface %s" % sim_cluster.link_port in " ".join(
            m for unused_h, unused_t, m in wrong.failures()), wrong

        # Then a rank on RoCE devices (a DGX Spark's vLLM worker under Ray) while the cluster is
        # set up for sockets: drift names N5 on the head, a deploy fails and keeps the engine.
        print_in_engine_log(head, "dgx_spark_vllm_ray_ibext.log")
        found = drift(run_playbook, sim_cluster)
        assert found.status == "failed" and findings(found) == {(head, "N5")}, found
        again = run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=1800)
        assert again.status == "failed", again
        message = dict(((h, t), m) for h, t, m in again.failures())[(head, LOGS_TASK)]
        assert "spark-3995 pid 2981: NET/IBext_v10 over rocep1s0f1, roceP2p1s0f1, but the profile's transport is socket" in message
        assert "The engine was left running" in message, message
        assert engine_process(head)[:2] == engine_before[:2]
    finally:
        on_host(head, "docker", "exec", HEAD, "truncate", "-s", size, ENGINE_LOG)


def test_drift_names_another_serving_image_on_a_node(sim_cluster, deployed, run_playbook):
    # The worker's tag now names other code than the head's (an image imported from an empty tar):
    # drift names M1 there, with both IDs; the running container is untouched.
    head, worker = sim_cluster.hosts
    original = on_host(worker, "docker", "image", "inspect", "--format", "{{.Id}}", sim_cluster.image_name).strip()
    other = on_host(worker, "sh", "-c", "tar -cf - -C /etc hostname | docker import - gb10-e2e-other:drift").strip()
    try:
        on_host(worker, "docker", "tag", other, sim_cluster.image_name)
        result = drift(run_playbook, sim_cluster)
        assert result.status == "failed", result
        found = findings(result)
        assert (worker, "M1") in found and not {f for f in found if f[0] == head}, found
        message = result.results_by_host(task="Serving image - present with the head's image ID (M1)",
                                         event="runner_on_failed")[worker]["msg"]
        assert other in message and original in message, message
    finally:
        on_host(worker, "docker", "tag", original, sim_cluster.image_name)
        on_host(worker, "docker", "rmi", "gb10-e2e-other:drift")


def test_drift_names_a_stopped_ray_worker(sim_cluster, deployed, run_playbook):
    # Next to last in this module: the engine loses its rank-1 worker.
    worker = sim_cluster.hosts[1]
    on_host(worker, "docker", "stop", WORKER)
    result = drift(run_playbook, sim_cluster)
    assert result.status == "failed"
    assert (worker, "R2") in findings(result), result
    assert on_host(worker, "docker", "inspect", "-f", "{{.State.Running}}", WORKER).strip() == "false"


def test_drift_names_a_removed_link_address(sim_cluster, deployed, run_playbook):
    # Last in this module (the engine's worker is gone already): the worker's cluster port loses
    # its address; drift names N5 there and what is missing, and the run changes nothing.
    worker = sim_cluster.hosts[1]
    address = "%s/24" % sim_cluster.cluster_ips[worker]
    on_host(worker, "ip", "addr", "del", address, "dev", sim_cluster.link_port)
    try:
        result = drift(run_playbook, sim_cluster)
        assert result.status == "failed", result
        assert (worker, "N5") in findings(result), result
        message = result.results_by_host(task="Cluster link - address, MTU and netplan file as deployed (N5)",
                                         event="runner_on_failed")[worker]["msg"]
        assert sim_cluster.link_port in message and sim_cluster.cluster_ips[worker] in message, message
        assert link_state(worker, sim_cluster.link_port)[0] == []
    finally:
        subprocess.run(["docker", "exec", worker, "ip", "addr", "add", address, "dev", sim_cluster.link_port],
                       capture_output=True, timeout=60, check=False)
