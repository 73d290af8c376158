# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The recover path (rules O1, H4) on the simulated 2-Spark cluster: leaked unified memory is
planted on one host with the fixture kit; playbooks/recover.yml reboots that host only (its boot
id changes, the other's does not) and frees the leak; deploy-m27.yml then brings the cluster back
and it answers a chat request again.

It starts from whatever state the cluster is in (after test_2b_drift.py: a stopped Ray worker),
which is where an operator runs recover.yml in practice.
"""

import openai

from .helpers import HEAD, PLAYBOOK, PORT, api_key, assert_succeeded, on_host

RECOVER = "playbooks/recover.yml"
LEAK_GIB = 40  # far above the 8 GiB threshold, as in the field reports (tens of GB, H4)


def boot_id(host):
    return on_host(host, "cat", "/run/gb10-boot-id").strip()


def unaccounted_gib(result, host):
    """unaccounted_gib of the last unified_memory reading recover.yml made on host."""
    readings = [d["res"] for d in result.host_results(host=host)
                if d.get("task_action") == "gb10.serving.unified_memory"]
    assert readings, result
    return readings[-1]["unaccounted_gib"]


def test_recover_reboots_only_the_leaked_host_then_the_cluster_serves_again(sim_cluster, run_playbook):
    head, leaked = sim_cluster.hosts
    on_host(leaked, "gb10-plant-leak", str(LEAK_GIB))
    boots = {h: boot_id(h) for h in sim_cluster.hosts}

    recovered = run_playbook(RECOVER, sim_cluster.inventory, timeout=1500)

    assert_succeeded(recovered, sim_cluster.hosts)
    rebooted = {d["host"] for d in recovered.host_results(task="Reboot the leaked node")}
    assert rebooted == {leaked}, recovered
    assert boot_id(leaked) != boots[leaked]
    assert boot_id(head) == boots[head]  # a healthy node is never rebooted
    assert unaccounted_gib(recovered, leaked) < 2, recovered

    deployed = run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=3000)

    assert_succeeded(deployed, sim_cluster.hosts)
    client = openai.OpenAI(base_url="http://%s:%d/v1" % (sim_cluster.ips[head], PORT),
                           api_key=api_key(head), timeout=300, max_retries=0)
    answer = client.chat.completions.create(
        model=client.models.list().data[0].id, max_tokens=512,
        messages=[{"role": "user", "content": "Are you back?"}])
    assert answer.usage.completion_tokens > 0
    assert on_host(head, "docker", "inspect", "-f", "{{.State.Running}}", HEAD).strip() == "true"
