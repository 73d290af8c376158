# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Ray worker killed under the serving engine (rules R2, O1, H4) on the simulated 2-Spark
cluster, the way a crashed or hard-stopped container goes on a Spark:
- drift.yml names the stopped worker (R2);
- the kill leaves the worker's rank's unified memory held by the driver: nobody plants it, the
  simulated Spark's driver keeps it because the container died under the rank (the fixture kit's
  gb10-gpu-ledger, tests/fixtures/gb10-sim/README.md);
- playbooks/recover.yml finds that leak, reboots that host only (its boot id changes, the head's
  does not) and frees it. The head's engine is still there when recover.yml starts, and it stops
  it before Ray and the containers (H4), so the head leaks nothing: stopping the head's container
  first would leak the head too, and reboot it;
- deploy-m27.yml then brings the cluster back and it answers a chat request again.
The tests run in this order, each on the state the one before left.
"""

import openai

from .helpers import (HEAD, PLAYBOOK, PORT, WORKER, api_key, assert_succeeded, drift, findings, on_host,
                      worker_running)

RECOVER = "playbooks/recover.yml"


def boot_id(host):
    return on_host(host, "cat", "/run/gb10-boot-id").strip()


def readings(result, host):
    """Every gb10.serving.unified_memory reading the run made on host, in order."""
    found = [d["res"] for d in result.host_results(host=host) if d.get("task_action") == "gb10.serving.unified_memory"]
    assert found, result
    return found


def test_drift_names_a_ray_worker_killed_under_the_engine(serving, run_playbook):
    worker = serving.hosts[1]
    on_host(worker, "docker", "kill", WORKER)

    result = drift(run_playbook, serving)

    assert result.status == "failed"
    assert (worker, "R2") in findings(result), result
    assert not worker_running(worker)


def test_recover_reboots_only_the_host_the_kill_leaked_then_the_cluster_serves_again(sim_cluster, run_playbook):
    head, worker = sim_cluster.hosts
    boots = {h: boot_id(h) for h in sim_cluster.hosts}

    recovered = run_playbook(RECOVER, sim_cluster.inventory, timeout=1500)

    assert_succeeded(recovered, sim_cluster.hosts)
    # The leak is the kill's, measured after the engine, Ray and the containers were stopped.
    assert readings(recovered, worker)[0]["leaked"], readings(recovered, worker)
    assert not readings(recovered, head)[0]["leaked"], readings(recovered, head)
    rebooted = {d["host"] for d in recovered.host_results(task="Reboot the leaked node")}
    assert rebooted == {worker}, recovered
    assert boot_id(worker) != boots[worker]
    assert boot_id(head) == boots[head]  # a healthy node is never rebooted
    assert readings(recovered, worker)[-1]["unaccounted_gib"] < 2, readings(recovered, worker)

    deployed = run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=3000)

    assert_succeeded(deployed, sim_cluster.hosts)
    client = openai.OpenAI(base_url="http://%s:%d/v1" % (sim_cluster.ips[head], PORT),
                           api_key=api_key(head), timeout=300, max_retries=0)
    answer = client.chat.completions.create(
        model=client.models.list().data[0].id, max_tokens=512,
        messages=[{"role": "user", "content": "Are you back?"}])
    assert answer.usage.completion_tokens > 0
    assert on_host(head, "docker", "inspect", "-f", "{{.State.Running}}", HEAD).strip() == "true"
