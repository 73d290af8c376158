# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/deploy-m3.yml on the simulated 3-Spark cluster (TP=3), after the 2-host modules: a
third host joins the cluster they left (the first test checks it has no model and no cluster
address, and the serving image the simulation keeps on it: tests/sim/cluster.py, IMAGE_HOLDERS),
and the deploy turns the TP=2 cluster into a TP=3 one (test_4 ended with teardown.yml, so the deploy
starts Ray and the engine on stopped nodes). The copy of the image to a fresh node is
test_2_deploy.py's; here every node already holds the head's image ID, and nothing is copied.
"""

import json
import subprocess

import pytest

from .helpers import (HEAD, KNOWN_ANSWER_TASK, TINY_ANSWER, api_client, assert_succeeded, engine_process, ok_results,
                      on_host)

PLAYBOOK = "playbooks/deploy-m3.yml"

# `scripts/test.sh full` only (issue 51's budget, 2026-12-02): the test command measured ~88 minutes
# on this 2-core machine with this module (about 600 s: a third host's host prep, link and model
# copy, then a TP=3 launch) against CI's hard limit of 90. The default run keeps the TP=3 profile's
# rendering and refusals (tests/unit: test_render, test_profile, test_preflight); this module comes
# back to the default run when a launch costs less (issue 51).
pytestmark = pytest.mark.full


@pytest.fixture(scope="module")
def deployed3(sim_cluster3, run_playbook):
    result = run_playbook(PLAYBOOK, sim_cluster3.inventory, timeout=3000)
    assert_succeeded(result, sim_cluster3.hosts)
    return result


def test_the_third_host_joins_fresh(sim_cluster3, run_adhoc):
    # Without the model or a cluster address (the deploy gives it both), with the head's image.
    assert len(sim_cluster3.hosts) == 3
    third = sim_cluster3.hosts[2]
    result = run_adhoc("ansible.builtin.stat", "path=%s/config.json" % sim_cluster3.model_path,
                       sim_cluster3.inventory)
    exists = {h: r["stat"]["exists"] for h, r in ok_results(result, sim_cluster3.hosts).items()}
    assert exists[sim_cluster3.head] and not exists[third], exists
    result = run_adhoc("ansible.builtin.shell", "ip -o -4 addr show dev %s" % sim_cluster3.link_port,
                       sim_cluster3.inventory, pattern=third)
    assert ok_results(result, [third])[third]["stdout"].strip() == ""
    ids = {h: on_host(h, "docker", "image", "inspect", "--format", "{{.Id}}", sim_cluster3.image_name).strip()
           for h in (sim_cluster3.head, third)}
    assert ids[third] == ids[sim_cluster3.head], ids


@pytest.mark.rule("R5")
def test_ray_sees_three_nodes(sim_cluster3, deployed3):
    out = on_host(sim_cluster3.head, "docker", "exec", HEAD, "python3", "-c",
                  "import json, ray; ray.init(address='auto', logging_level='ERROR'); "
                  "print(json.dumps([n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']]))")
    assert sorted(json.loads(out.strip().splitlines()[-1])) == sorted(sim_cluster3.cluster_ips.values())


@pytest.mark.rule("V8")
def test_engine_is_tp3_and_answers(sim_cluster3, deployed3):
    unused_pid, unused_start, argv = engine_process(sim_cluster3.head)
    assert argv[argv.index("--tensor-parallel-size") + 1] == "3"
    # Issue 27: over three ranks, each with a third of the vocabulary, the deploy's greedy question
    # got the same answer as the tiny model at TP=1.
    known = deployed3.results_by_host(task=KNOWN_ANSWER_TASK)[sim_cluster3.head]["msg"]
    assert known.startswith("known answer: ") and TINY_ANSWER in known, known
    client = api_client(sim_cluster3)
    answer = client.chat.completions.create(
        model=client.models.list().data[0].id, max_tokens=512,
        messages=[{"role": "user", "content": "Count to five."}])
    assert answer.choices[0].message.content or answer.choices[0].message.tool_calls, answer
    assert answer.usage.completion_tokens > 0


def test_the_third_host_got_the_link_and_kept_its_image(sim_cluster3, deployed3):
    third = sim_cluster3.hosts[2]
    for port, address in ((sim_cluster3.link_port, sim_cluster3.cluster_ips[third]),
                          (sim_cluster3.twin_port, sim_cluster3.twin_ips[third])):
        out = on_host(third, "ip", "-o", "-4", "addr", "show", "dev", port)
        assert "inet %s/24" % address in out, out
    ids = {h: on_host(h, "docker", "image", "inspect", "--format", "{{.Id}}", sim_cluster3.image_name).strip()
           for h in sim_cluster3.hosts}
    assert len(set(ids.values())) == 1, ids
    # Every node had the head's ID: the plan skipped them all, nothing crossed the link.
    results = deployed3.results_by_host(task="What this node got, for the summary and the callers")
    assert {h: r["ansible_facts"]["serving_image_result"]["action"] for h, r in results.items()} == {
        h: "had" for h in sim_cluster3.hosts}, results


@pytest.mark.rule("M3")
def test_model_was_copied_to_every_node(sim_cluster3, deployed3):
    # model_sync copies every file but its own .gb10-* state (and the sim's build marker).
    sums = {h: subprocess.run(["docker", "exec", h, "sh", "-c",
                               "cd %s && find . -type f ! -name '.gb10-*' | LC_ALL=C sort | xargs sha256sum" % sim_cluster3.model_path],
                              capture_output=True, text=True, check=True).stdout
            for h in sim_cluster3.hosts}
    assert len(set(sums.values())) == 1 and sums[sim_cluster3.head], sums
