# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""upgrade.yml and rollback.yml on the serving 2-Spark cluster (rule O8), as an owner runs them
on a later day, with a client asking the front door every half second throughout:
- an upgrade to an image no node holds, and to a model that does not fit, are refused with nothing
  of the serving launch touched;
- an upgrade to a second build of the serving image (built on the head, as an owner builds one)
  serves it, the launch before kept with its image ID; the client's gap is measured;
- an upgrade whose engine refuses an argument of its new recipe starts the launch that served again
  by itself, and the run ends failed naming both;
- rollback.yml returns to the first build on request; the client's gap is measured.
No leak and no reboot anywhere. The cluster ends serving the launch it served before the module.
The refusals and the automatic rollback run in the default tier (about three minutes on the cluster
test_2 serves); the upgrade that serves and the rollback on request, two more engine starts and the
gate's benchmarks, in `scripts/test.sh full`."""
import json
import os
import shutil
import ssl
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml

from .conftest import TOP
from .helpers import (API_PORT, HEAD, KNOWN_ANSWER_TASK, LOGS_TASK, PROFILE, STATUS_TASK, WORKER, api_key,
                      assert_succeeded, boot_id, failure_messages, gateway_ca, leaks, on_host, run_text, serves)

pytestmark = pytest.mark.rule("O8")
UPGRADE = "playbooks/upgrade.yml"
ROLLBACK = "playbooks/rollback.yml"
SERVED = "/etc/gb10/served-profile.json"  # gb10_served_record's default
PREVIOUS = "/etc/gb10/served-profile.previous.json"  # gb10_previous_record's default
VARIANT = "gb10-sim-serving:variant"
RESULT_TASK = "Say what serves, and the command that returns to the launch before"
ROLLED_BACK_TASK = "End the run failed, naming both launches (the one before serves again)"
READY_TASK = "Wait for /health, showing progress (V7)"
GATE_TASK = "Refuse a new launch that decodes slower than the profile's gate allows"
with open(os.path.join(TOP, "profiles", PROFILE + ".yml")) as _profile:
    SERVED_NAME = yaml.safe_load(_profile)["model"]["served_name"]  # the name clients send


def record(head, path=SERVED):
    return json.loads(on_host(head, "cat", path))


def previous_record(head):
    """The launch the head keeps as the one before, None where only one has served."""
    return record(head, PREVIOUS) if on_host(head, "sh", "-c", "test -f %s && echo yes || true" % PREVIOUS).strip() else None


def engine_image(host, container):
    """The image ID a node's serving container runs."""
    return on_host(host, "docker", "inspect", "-f", "{{.Image}}", container).strip()


def image_id(host, name):
    return on_host(host, "docker", "image", "inspect", "-f", "{{.Id}}", name).strip()


def untouched(sim_cluster):
    """What a refused run must leave as it was: each serving container (by container ID), and the record."""
    containers = {(h, c): on_host(h, "docker", "inspect", "-f", "{{.Id}}", c).strip()
                  for h, c in [(sim_cluster.head, HEAD)] + [(w, WORKER) for w in sim_cluster.hosts[1:]]}
    return containers, record(sim_cluster.head)


class Client(threading.Thread):
    """A client asking the front door for a one-token answer every half second until stopped (at most
    `limit` seconds): when each answer came, so that the gap a cut-over costs it can be read."""

    def __init__(self, sim_cluster, limit=1800):
        super().__init__(daemon=True)
        head = sim_cluster.head
        self.url = "https://%s:%d/v1/chat/completions" % (sim_cluster.ips[head], API_PORT)
        self.key = api_key(head)
        self.context = ssl.create_default_context(cafile=gateway_ca(head))
        self.limit = limit
        self.answers = []
        self.done = threading.Event()

    def ask(self):
        body = json.dumps({"model": SERVED_NAME, "max_tokens": 1,
                           "messages": [{"role": "user", "content": "Hello"}]}).encode()
        request = urllib.request.Request(self.url, data=body, headers={
            "Content-Type": "application/json", "Authorization": "Bearer " + self.key})
        try:
            with urllib.request.urlopen(request, timeout=10, context=self.context) as reply:
                return reply.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def start(self):
        """Start asking; return once the first answer came (the launch serves before the run starts)."""
        super().start()
        end = time.monotonic() + 120
        while not self.answers and time.monotonic() < end:
            time.sleep(0.5)
        assert self.answers, "no answer from %s before the run" % self.url
        return self

    def run(self):
        end = time.monotonic() + self.limit
        while not self.done.is_set() and time.monotonic() < end:
            if self.ask():
                self.answers.append(time.monotonic())
            self.done.wait(0.5)

    def stop(self):
        self.done.set()
        self.join(30)
        return self

    def gap(self):
        """The longest time between two answers (seconds)."""
        return max(b - a for a, b in zip(self.answers, self.answers[1:]))


def engine_start_s(result, head):
    """How long the run waited for the new engine's /health (V7): one engine start."""
    return sum(d.get("duration", 0) for d in result.host_results(task=READY_TASK, host=head))


@pytest.fixture(scope="module")
def module_start():
    """What the cluster was when this module's first test began (filled by `upgrading`)."""
    return {}


@pytest.fixture
def upgrading(serving, module_start):
    """The serving cluster with a second build of the serving image on the head, made there as an
    owner makes one (a new label on the same layers: another image ID under another name); the
    nodes' boot IDs, leak ledgers and launch record when the module began, to compare after every run."""
    sim_cluster = serving
    head = sim_cluster.head
    if not module_start:
        on_host(head, "sh", "-c", "printf 'FROM gb10-sim-serving:local\\nLABEL org.gb10.build=variant\\n' "
                "| docker build -q -t %s -" % VARIANT)
        module_start.update({"boots": {h: boot_id(h) for h in sim_cluster.hosts}, "leaks": leaks(sim_cluster.hosts),
                             "first": record(head)})
    return sim_cluster, module_start


def assert_no_leak_and_no_reboot(sim_cluster, before):
    assert leaks(sim_cluster.hosts) == before["leaks"]
    assert {h: boot_id(h) for h in sim_cluster.hosts} == before["boots"]


def site_recipes(tmp_path, overlay=None, engine_args=None, gate=None):
    """A site's own recipes (gb10_profiles_dir): the collection's, with one overlay, one engine
    argument (and its reason) or an upgrade gate added, as an owner writes a recipe."""
    site = tmp_path / "recipes"
    shutil.copytree(os.path.join(TOP, "profiles"), str(site))
    if overlay:
        name, changes = overlay
        with open(os.path.join(TOP, "profiles", "overlays", "sim-cpu.yml")) as f:
            data = yaml.safe_load(f)
        data.update(changes)
        (site / "overlays" / (name + ".yml")).write_text(yaml.safe_dump(data))
    if engine_args or gate:
        path = site / (PROFILE + ".yml")
        data = yaml.safe_load(path.read_text())
        data["engine_args"].update(engine_args or {})
        data["why"].update({"engine_args.%s" % k: "a flag of a later vLLM's recipe (O8)" for k in engine_args or {}})
        if gate:
            data["upgrade_gate"] = gate
        path.write_text(yaml.safe_dump(data))
    return str(site)


def test_an_upgrade_to_an_image_no_node_holds_is_refused_with_the_serving_launch_untouched(upgrading, run_playbook):
    sim_cluster, before = upgrading
    kept = untouched(sim_cluster)
    result = run_playbook(UPGRADE, sim_cluster.inventory, timeout=900,
                          extravars={"gb10_profile_image": "gb10-sim-serving:0.0.1-missing"})
    assert result.status == "failed"
    # Preflight's refusal on the head, naming the image and how to get it there (M1, A5).
    failed = [message for unused_host, task, message in result.failures() if task == "Refuse before anything changes"]
    assert failed and all("image gb10-sim-serving:0.0.1-missing of profile %s is not there" % PROFILE in message
                          and "Fix on %s: build it" % sim_cluster.head in message for message in failed), run_text(result)
    assert untouched(sim_cluster) == kept and serves(sim_cluster)
    assert_no_leak_and_no_reboot(sim_cluster, before)


def test_an_upgrade_to_a_model_that_does_not_fit_is_refused_with_the_serving_launch_untouched(
        upgrading, run_playbook, tmp_path):
    sim_cluster, before = upgrading
    kept = untouched(sim_cluster)
    # The same recipe, its model 300 GB of weights: more than two Sparks' pools hold (M2).
    site = site_recipes(tmp_path, overlay=("sim-big", {"model": dict(yaml.safe_load(open(os.path.join(
        TOP, "profiles", "overlays", "sim-cpu.yml")))["model"], weights_gb=300)}))
    result = run_playbook(UPGRADE, sim_cluster.inventory, timeout=900,
                          extravars={"gb10_profiles_dir": site, "gb10_profile_overlay": "sim-big"})
    assert result.status == "failed"
    failed = [message for unused_host, task, message in result.failures() if task == "Refuse before anything changes"]
    assert failed and all("profile %s (gb10_profile) does not fit: weights do not fit (M2): 300 GB of weights" % PROFILE
                          in message for message in failed), run_text(result)
    assert untouched(sim_cluster) == kept and serves(sim_cluster)
    assert_no_leak_and_no_reboot(sim_cluster, before)


def test_a_rollback_to_an_image_id_a_node_no_longer_holds_is_refused_with_the_serving_launch_untouched(
        upgrading, run_playbook):
    sim_cluster, before = upgrading
    head = sim_cluster.head
    kept = untouched(sim_cluster)
    had = previous_record(head)
    # The launch before ran a build every node has pruned since.
    gone = dict(record(head), image_id="sha256:" + "0" * 64)
    write = "import json, sys; open(sys.argv[1], 'w').write(sys.argv[2])"
    on_host(head, "python3", "-c", write, PREVIOUS, json.dumps(gone))
    try:
        result = run_playbook(ROLLBACK, sim_cluster.inventory, timeout=600)
    finally:
        if had is None:
            on_host(head, "rm", "-f", PREVIOUS)
        else:
            on_host(head, "python3", "-c", write, PREVIOUS, json.dumps(had))
    assert result.status == "failed"
    messages = failure_messages(result, "Refuse a node without the image that served")
    assert sorted(messages) == sorted(sim_cluster.hosts), run_text(result)
    assert all(("%s: the launch to return to ran %s as image sha256:%s, which this node's Docker no longer holds"
                % (host, gone["image"], "0" * 64)) in message and "Fix: load that build on %s" % host in message
               for host, message in messages.items()), messages
    assert untouched(sim_cluster) == kept and serves(sim_cluster)
    assert_no_leak_and_no_reboot(sim_cluster, before)


@pytest.mark.full
def test_an_upgrade_to_a_second_image_serves_it_and_keeps_the_first_to_return_to(upgrading, run_playbook, tmp_path):
    sim_cluster, before = upgrading
    head = sim_cluster.head
    variant = image_id(head, VARIANT)
    # The site's recipe holds a new launch to the old one's decode speed: within 90 % here, where two
    # shared cores and the tiny model measure the path, not a speed (a Spark's recipe would say 15).
    site = site_recipes(tmp_path, gate={"decode_within_pct": 90})
    client = Client(sim_cluster)
    client.start()
    result = run_playbook(UPGRADE, sim_cluster.inventory, timeout=2400,
                          extravars={"gb10_profile_image": VARIANT, "gb10_profiles_dir": site})
    client.stop()
    assert_succeeded(result, sim_cluster.hosts)
    # Every node runs the new build, copied to the worker by ID; the known answer passed on it.
    assert engine_image(head, HEAD) == variant
    assert all(engine_image(w, WORKER) == variant for w in sim_cluster.hosts[1:])
    assert result.host_results(task=KNOWN_ANSWER_TASK, host=head)
    served, previous = record(head), record(head, PREVIOUS)
    assert (served["image"], served["image_id"], served["vars"]["gb10_profile_image"]) == (VARIANT, variant, VARIANT)
    assert previous == before["first"], (previous, before["first"])
    # Measured before the cut-over through the front door, and the new launch after its known answer.
    gate = result.results_by_host(task=GATE_TASK)[sim_cluster.hosts[0]]["msg"]
    assert gate.startswith("decode within 90 % of ") and gate.endswith("-before.json"), gate
    said = result.results_by_host(task=RESULT_TASK)[sim_cluster.hosts[0]]["msg"]
    assert said.startswith("Upgraded to %s (%s)." % (PROFILE, VARIANT)) and "/rollback.yml -i " in said, said
    # The client's gap: the old launch's last answer to the new one's first (BENCHMARKS.md); it is
    # answered again after the run.
    assert client.ask()
    # One look names the launch before and the command that returns to it.
    looked = run_playbook("playbooks/status.yml", sim_cluster.inventory, timeout=600)
    assert_succeeded(looked, sim_cluster.hosts)
    screen = looked.results_by_host(task=STATUS_TASK)[head]["msg"]
    back = [line for line in screen if line.startswith("Launch before: ")]
    assert back == ["Launch before: profile %s, image %s %s; ansible-playbook %s -i %s returns to it" % (
        PROFILE, before["first"]["image"], before["first"]["image_id"][:19], os.path.join(TOP, ROLLBACK),
        os.path.join(TOP, sim_cluster.inventory))], screen
    print("upgrade: client gap %.0f s, engine start %.0f s" % (client.gap(), engine_start_s(result, head)))
    assert_no_leak_and_no_reboot(sim_cluster, before)


def test_an_upgrade_whose_engine_refuses_its_recipe_starts_the_launch_before_again_by_itself(
        upgrading, run_playbook, tmp_path):
    sim_cluster, before = upgrading
    head = sim_cluster.head
    # The launch that serves: the first, or the second build where the full tier upgraded to it.
    served, previous = record(head), previous_record(head)
    running = engine_image(head, HEAD)
    # A recipe written for a later vLLM: a flag this image's vLLM does not know, refused at its start.
    site = site_recipes(tmp_path, engine_args={"kv-offload-from-a-later-vllm": True})
    result = run_playbook(UPGRADE, sim_cluster.inventory, timeout=2400, extravars={"gb10_profiles_dir": site})
    assert result.status == "failed"
    # The new engine failed (its logs collected, H9), and the run started the launch before again.
    assert failure_messages(result, LOGS_TASK), run_text(result)
    message = failure_messages(result, ROLLED_BACK_TASK)[sim_cluster.hosts[0]]
    assert message.startswith("The upgrade to %s (%s) failed: " % (PROFILE, served["image"])), message
    assert "Rolled back by itself: %s (%s) serves again" % (PROFILE, served["image"]) in message, message
    assert result.host_results(task=KNOWN_ANSWER_TASK, host=head)
    assert serves(sim_cluster) and engine_image(head, HEAD) == running
    assert (record(head), previous_record(head)) == (served, previous)
    assert_no_leak_and_no_reboot(sim_cluster, before)


@pytest.mark.full
def test_rollback_on_request_serves_the_first_image_again(upgrading, run_playbook):
    sim_cluster, before = upgrading
    head = sim_cluster.head
    upgraded = record(head)
    client = Client(sim_cluster)
    client.start()
    result = run_playbook(ROLLBACK, sim_cluster.inventory, timeout=2400)
    client.stop()
    assert_succeeded(result, sim_cluster.hosts)
    assert engine_image(head, HEAD) == before["first"]["image_id"]
    assert all(engine_image(w, WORKER) == before["first"]["image_id"] for w in sim_cluster.hosts[1:])
    # The launch it replaced is the one before now: a second rollback.yml returns to it.
    assert (record(head), record(head, PREVIOUS)) == (before["first"], upgraded)
    assert client.ask()
    print("rollback: client gap %.0f s, engine start %.0f s" % (client.gap(), engine_start_s(result, head)))
    assert_no_leak_and_no_reboot(sim_cluster, before)
