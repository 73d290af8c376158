# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""reset.yml on the serving 2-Spark cluster (rule O7): refused without the cluster's name typed
back, with nothing changed; then every node as it came (packages, units, files, packet filter,
containers, images: the state conftest read from each host when the cluster was made, before any
playbook ran); a second run finds nothing to do; and a deploy after it serves again.
In `scripts/test.sh full` (a whole deploy from a reset cluster, about 10 minutes)."""
import json
import os

import pytest

from .conftest import FRESH_NODES, TOP
from .helpers import (PLAYBOOK, assert_succeeded, failure_messages, node_state, on_host, printed_playbook_command, serves,
                      state_differences)

pytestmark = [pytest.mark.full, pytest.mark.rule("O7")]
RESET = "playbooks/reset.yml"


def test_reset_is_refused_without_the_clusters_name_and_changes_nothing(serving, run_playbook):
    sim_cluster = serving
    before = dict((host, node_state(host)) for host in sim_cluster.hosts)
    result = run_playbook(RESET, sim_cluster.inventory, timeout=600)
    assert result.status == "failed"
    messages = list(failure_messages(result, "The cluster's name typed back (gb10_reset_confirm)").values())
    assert len(messages) == 1, messages  # run once, for the cluster
    message = messages[0]
    argv = printed_playbook_command(message)
    assert os.path.samefile(argv[1], os.path.join(TOP, RESET)), argv
    assert os.path.samefile(argv[argv.index("-i") + 1], os.path.join(TOP, sim_cluster.inventory)), argv
    assert argv[-2:] == ["-e", "gb10_reset_confirm=%s" % sim_cluster.head], argv
    assert dict((host, node_state(host)) for host in sim_cluster.hosts) == before
    assert serves(sim_cluster)


def test_reset_gives_every_node_back_as_it_came_and_a_deploy_serves_again(serving, run_playbook):
    sim_cluster = serving
    if not os.path.exists(FRESH_NODES):
        pytest.fail("no reading of the hosts as they came (%s): the cluster was not made by this run of the tests" % FRESH_NODES)
    with open(FRESH_NODES) as f:
        fresh = json.load(f)
    # What a registry pull leaves on the source node: serving_image logs Docker in and out as root,
    # and `docker logout` keeps the client's config file with its auths emptied. It goes with the reset too.
    on_host(sim_cluster.head, "sh", "-c", "mkdir -p -m 700 /root/.docker && printf '{\"auths\": {}}\\n' > /root/.docker/config.json "
            "&& chmod 600 /root/.docker/config.json")
    result = run_playbook(RESET, sim_cluster.inventory, timeout=1800,
                          extravars={"gb10_reset_confirm": sim_cluster.head})
    assert_succeeded(result, sim_cluster.hosts)
    said = result.results_by_host(task="What the reset took off")
    assert all(said[host]["msg"].startswith(host + ": ") and "paths removed" in said[host]["msg"]
               for host in sim_cluster.hosts), said
    assert not serves(sim_cluster)
    for host in sim_cluster.hosts:
        assert state_differences(fresh[host], node_state(host)) == {}, host

    again = run_playbook(RESET, sim_cluster.inventory, timeout=900, extravars={"gb10_reset_confirm": sim_cluster.head})
    assert_succeeded(again, sim_cluster.hosts)
    assert all(stats["changed"] == 0 for stats in again.stats.values()), again.stats

    deployed = run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=3000)
    assert_succeeded(deployed, sim_cluster.hosts)
    assert serves(sim_cluster)


def test_a_deployed_node_without_its_record_is_refused_before_anything_changes(serving, run_playbook):
    # A node an earlier release deployed (no record of what it was before): nothing could be put back.
    sim_cluster = serving
    worker = sim_cluster.hosts[1]
    on_host(worker, "mv", "/var/lib/gb10-serving/baseline", "/var/lib/gb10-serving/baseline.kept")
    try:
        before = dict((host, node_state(host)) for host in sim_cluster.hosts)
        result = run_playbook(RESET, sim_cluster.inventory, timeout=600,
                              extravars={"gb10_reset_confirm": sim_cluster.head})
        assert result.status == "failed"
        messages = failure_messages(result, "Refuse a deployed node without its record")
        assert list(messages) == [worker], messages
        assert messages[worker].startswith("%s was deployed without a record of what it was before" % worker)
        assert dict((host, node_state(host)) for host in sim_cluster.hosts) == before
        assert serves(sim_cluster)
    finally:
        on_host(worker, "mv", "/var/lib/gb10-serving/baseline.kept", "/var/lib/gb10-serving/baseline")
