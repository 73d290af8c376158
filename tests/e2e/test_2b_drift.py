# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""drift.yml (rule O3) on the cluster test_2_deploy.py deployed, checked as an operator would:
the documented CI jobs pass on it as written, the link is measured on request beside the engine (`full`),
several independent drifts planted at once come back as one finding each, naming host and rule
(drift.yml runs every check on every host: one run covers them all), the printed fix
runs when pasted, NCCL's choice in the engine is read after the launch (`full`). A link that loses
its addresses under the engine (N5; Ray then loses the worker, R2) is test_3_recover.py's fault,
which recover.yml then repairs. Every run
is in check mode and changes nothing: each test checks that its plants are still in place.
"""

import argparse
import glob
import json
import os
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
import yaml

from .helpers import (HEAD, ENGINE_LOG, LAUNCH, LOGS_TASK, PROFILE, TOP, drift, drift_answers, engine_process, finding_messages,
                      findings, link_figures,
                      on_host, paste, user_env)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O3")

OVERRIDE = "/etc/modprobe.d/zz-nvidia-drm-override.conf"
ENV_FILE = "/etc/gb10/nccl.env"
RUNNING_SCRIPT = "/var/lib/gb10-engine/running.sh"  # vllm_serve_state_dir (roles/vllm_serve/vars)
GATEWAY_KEYS = "/etc/gb10/gateway/clients.map"  # api_gateway_dir's client keys on the head, root-only (A1)


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


# `full` (the test budget): the documented jobs' commands, each a drift run the default cases make too.
@pytest.mark.rule("O3")
@pytest.mark.full
def test_the_documented_ci_drift_jobs_pass_on_the_deployed_cluster(serving, run_playbook, tmp_path):
    # docs/ci/ is what users copy into their CI: each job's command must run as written, with the
    # inventory of the Sparks swapped for the simulated one, and publish the report it writes.
    # Jobs that run the same command with the same settings share one run; each job's published
    # report is checked. The first run on the deployed cluster: drift passes there.
    sim_cluster = serving
    runs = {}
    for job in sorted(glob.glob(os.path.join(TOP, "docs", "ci", "*.yml"))):
        with open(job) as f:
            text = f.read()
        commands = list(drift_job_commands(yaml.safe_load(text)))
        assert len(commands) == 1, (job, commands)
        command, env = commands[0]
        args = ansible_playbook_args(command)
        assert os.path.isfile(os.path.join(TOP, args.inventory)), args.inventory
        report_dir = env.pop("GB10_DRIFT_REPORT_DIR")
        published = "%s/drift-report.xml" % os.path.basename(report_dir)
        assert published in text, "%s must publish %s, where the callback writes its JUnit report" % (job, published)
        key = (args.playbook, args.check, args.diff, tuple(args.extra), tuple(sorted(env.items())))
        runs.setdefault(key, []).append(os.path.basename(job))
    assert runs

    # The nightly job runs on a CI runner, which has none of the controller's key files.
    # Check mode must neither make a key there (which a pasted fix would then roll out) nor find
    # drift for the lack of one: the controller's key folder is moved aside for these runs.
    keys = os.path.expanduser("~/.config/gb10-serving")
    aside = keys + ".e2e-aside"
    os.rename(keys, aside)
    try:
        for number, ((playbook, check, diff, extra, env), jobs) in enumerate(sorted(runs.items())):
            report_dir = tmp_path / str(number)
            result = run_playbook(playbook, sim_cluster.inventory, check=check, diff=diff, timeout=900,
                                  extravars=dict(kv.split("=", 1) for kv in extra),
                                  envvars=dict(env, GB10_DRIFT_REPORT_DIR=str(report_dir)))

            assert result.status == "successful", (jobs, result)
            cases = list(ET.parse(str(report_dir / "drift-report.xml")).getroot().iter("testcase"))
            assert set(sim_cluster.hosts) <= {case.get("classname") for case in cases}, (jobs, cases)
            assert not [case for case in cases if case.find("failure") is not None], jobs
        made = glob.glob(os.path.join(keys, "*"))
        assert not made, made
    finally:
        shutil.rmtree(keys, ignore_errors=True)
        os.rename(aside, keys)


# `full` (the test budget, paid for the watchdog's cases): the probe it runs is the deploy's
# own link measurement, which test_2_deploy.py shows on every run; this adds only "beside the
# serving engine, on request".
@pytest.mark.rule("N5")
@pytest.mark.full
def test_drift_measures_the_link_on_request(serving, run_playbook):
    # gb10_drift_link_check=true: the deploy's probe, beside the serving engine, as an N5 check of
    # every host; the engine keeps running.
    sim_cluster = serving
    engine_before = engine_process(sim_cluster.head)
    result = drift(run_playbook, sim_cluster, gb10_drift_link_check=True)
    assert result.status == "successful", result
    measured = result.results_by_host(task="Refuse a slow or wrong wire, naming every node (N5)")
    busbw, tcp, unused_report = link_figures(measured[sim_cluster.head]["msg"])
    assert set(busbw) == set(sim_cluster.hosts) and tcp, measured
    assert engine_process(sim_cluster.head)[:2] == engine_before[:2]


# `full` (the test budget): drift's run, its report and its printed fix are the pasted-fix case below
# in the default run; each detector here is its role's drift entry point, shown in molecule.
@pytest.mark.rule("N5", "A1", "O3")
@pytest.mark.full
def test_independent_drifts_are_each_named_in_one_run(serving, run_playbook):
    # On the worker: DGX OS's modprobe override came back (H2) and its image tag names other code
    # than the head's (M1; the running Ray container is untouched, so R2 may come with it). On the
    # head: a hand-edited env file (GLOO_SOCKET_IFNAME is a socket name on the cluster link, N3),
    # an engine restarted by hand with other flags (its launch id no longer matches, R1), and NCCL
    # in the engine on sockets over eth0 (a real GPU machine's capture, tests/fixtures/nccl/), where
    # the cluster runs RoCE (the wrong wire, N5), and the gateway's client keys opened to every user
    # of the head (A1).
    sim_cluster = serving
    head, worker = sim_cluster.hosts
    env_file = on_host(head, "cat", ENV_FILE)
    log_size = on_host(head, "docker", "exec", HEAD, "stat", "-c", "%s", ENGINE_LOG).strip()
    image = on_host(worker, "docker", "image", "inspect", "--format", "{{.Id}}", sim_cluster.image_name).strip()
    other = on_host(worker, "sh", "-c", "tar -cf - -C /etc hostname | docker import - gb10-e2e-other:drift").strip()
    try:
        on_host(worker, "sh", "-c", "echo 'options nvidia-drm modeset=1' > " + OVERRIDE)
        on_host(worker, "docker", "tag", other, sim_cluster.image_name)
        on_host(head, "sh", "-c", "sed -i 's/^GLOO_SOCKET_IFNAME=.*/GLOO_SOCKET_IFNAME=lo/' " + ENV_FILE)
        on_host(head, "docker", "exec", HEAD, "sed", "-i", "s/^# gb10-engine-id: /# gb10-engine-id: hand-/",
                RUNNING_SCRIPT)
        print_in_engine_log(head, "device_h100_socket_profile.log")
        on_host(head, "chmod", "0644", GATEWAY_KEYS)

        result = drift(run_playbook, sim_cluster)

        assert result.status == "failed", result
        found = findings(result)
        assert {f for f in found if f[0] == head} == {(head, "N3"), (head, "R1"), (head, "N5"), (head, "A1")}, found
        assert "clients.map is missing or not root-only (0600)" in finding_messages(
            result, "The API gateway serves the deployed routes, root-only keys, running (A1)")[head]
        allowed = {(worker, "H2"), (worker, "M1"), (worker, "R2"), (head, "N3"), (head, "R1"), (head, "N5"), (head, "A1")}
        assert {(worker, "H2"), (worker, "M1")} <= found <= allowed, found
        message = finding_messages(result, "Serving image - present with the head's image ID (M1)")[worker]
        assert other in message and image in message, message
        read = result.results_by_host(task="Tell which transport NCCL took in the engine")[head]
        ranks = read["ansible_facts"]["vllm_serve_nccl"]["ranks"]
        # The engine's own ranks took IB over both twins' HCAs (the simulation's NCCL stand-in);
        # the planted capture did not.
        assert "vm pid 514 (rank 0): NET/Socket over eth0 (192.0.2.2)" in ranks, ranks
        assert [rank for rank in ranks if "NET/IB over roceP2p1s0f1, rocep1s0f1" in rank], ranks
        assert "vm pid 514 (rank 0): NET/Socket over eth0 (192.0.2.2), but the profile's transport is roce" in " ".join(
            answer["finding"] for unused_h, unused_t, answer in drift_answers(result)), result
        # Check mode left every plant where it was.
        on_host(worker, "test", "-f", OVERRIDE)
        assert "GLOO_SOCKET_IFNAME=lo" in on_host(head, "cat", ENV_FILE)
        assert on_host(worker, "docker", "image", "inspect", "--format", "{{.Id}}", sim_cluster.image_name).strip() == other
    finally:
        on_host(worker, "rm", "-f", OVERRIDE)
        on_host(worker, "docker", "tag", image, sim_cluster.image_name)
        on_host(worker, "docker", "rmi", "gb10-e2e-other:drift")
        subprocess.run(["docker", "exec", "-i", head, "sh", "-c", "cat > " + ENV_FILE],
                       input=env_file, text=True, check=True, timeout=60)
        on_host(head, "docker", "exec", HEAD, "sed", "-i", "s/^# gb10-engine-id: hand-/# gb10-engine-id: /",
                RUNNING_SCRIPT)
        on_host(head, "docker", "exec", HEAD, "truncate", "-s", log_size, ENGINE_LOG)
        on_host(head, "chmod", "0600", GATEWAY_KEYS)


def print_in_engine_log(head, capture):
    """Append a real NCCL init capture (tests/fixtures/nccl/, sources in its README) to the running
    engine's log, as its Ray workers print it on GPUs: the simulated engine runs Gloo."""
    with open(os.path.join(TOP, "tests", "fixtures", "nccl", capture)) as f:
        subprocess.run(["docker", "exec", "-i", head, "docker", "exec", "-i", HEAD, "sh", "-c", "cat >> " + ENGINE_LOG],
                       input=f.read(), text=True, check=True, timeout=60)


@pytest.mark.rule("O3")
def test_the_printed_drift_fix_runs_when_pasted(serving, tmp_path):
    # A hand-edited env file on one node; the report's fix is pasted as printed and
    # must run (the profile the drift run was given, --limit only where the playbook takes it).
    sim_cluster = serving
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
        assert argv[:2] == ["ansible-playbook", "playbooks/steps/04_host_prep.yml"], argv
        assert argv[argv.index("--limit") + 1] == worker and "--check" not in argv

        engine_before = engine_process(sim_cluster.head)
        fixed = paste(finding["fix"], env, timeout=900)

        assert fixed.returncode == 0, fixed.stdout[-4000:]
        assert on_host(worker, "cat", "/etc/gb10/nccl.env") == original
        # Nothing restarted: the engine is the same process. (Drift passing on the deployed cluster
        # is the documented CI jobs' case above; a third drift run here cost a minute.)
        assert engine_process(sim_cluster.head)[:2] == engine_before[:2]
    finally:
        subprocess.run(["docker", "exec", "-i", worker, "sh", "-c", "cat > /etc/gb10/nccl.env"],
                       input=original, text=True, check=True, timeout=60)


# `full` (the test budget): test_4_safety.py's launch in Ray containers without the RDMA
# settings fails the same check on the engine's own socket fallback and keeps the engine; this one
# reads a real GPU machine's capture, which the independent-drifts case above reads too.
@pytest.mark.rule("N5")
@pytest.mark.full
def test_a_deploy_fails_on_nccl_over_another_transport_and_keeps_the_engine(serving, run_playbook):
    # N5 after the launch: a rank that found no RoCE device and fell back to sockets
    # (a real capture of NCCL's silent fallback) while the cluster is set up for RoCE; the deploy
    # reads it from the engine's log since its start, fails naming it, and leaves the engine running.
    # The launch step alone: the check is its own, and the steps before it have nothing
    # to redo on the serving cluster.
    sim_cluster = serving
    head = sim_cluster.head
    size = on_host(head, "docker", "exec", HEAD, "stat", "-c", "%s", ENGINE_LOG).strip()
    engine_before = engine_process(head)
    try:
        print_in_engine_log(head, "device_h100_roce_profile_no_rdma.log")
        again = run_playbook(LAUNCH, sim_cluster.inventory, timeout=1800, extravars={"gb10_profile": PROFILE})
        assert again.status == "failed", again
        message = dict(((h, t), m) for h, t, m in again.failures())[(head, LOGS_TASK)]
        assert ("vm pid 548 (rank 0): NET/Socket over eth0 (192.0.2.2), but the profile's transport is roce: "
                "NCCL found no usable RoCE device") in message, message
        assert "The engine was left running" in message, message
        assert engine_process(head)[:2] == engine_before[:2]
    finally:
        on_host(head, "docker", "exec", HEAD, "truncate", "-s", size, ENGINE_LOG)
