# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Last e2e module: `down` removes what the simulation made, and nothing else ("a
teardown command removes everything it created, and nothing else")."""

import docker


def test_down_removes_what_the_simulation_made_and_nothing_else(sim_manager):
    cluster = sim_manager.ensure(sim_manager.size or 2)  # the cluster the modules before left
    client = docker.from_env()
    # Same name prefix, no label: a container the simulation did not make (never started).
    decoy = client.containers.create(cluster.state["host_image"], name="gb10-sim-decoy-unlabelled")
    try:
        sim_manager.cluster.down(keep_cache=True)
        sim_manager.size = None  # the next fixture request brings a fresh cluster up again
        label = "gb10.sim=cluster"
        assert client.containers.list(all=True, filters={"label": label}) == []
        assert client.networks.list(filters={"label": label}) == []
        assert client.containers.get(decoy.id).name == "gb10-sim-decoy-unlabelled"
    finally:
        decoy.remove(force=True)
