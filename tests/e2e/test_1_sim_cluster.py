# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated Spark cluster itself, checked the way the roles will use it: through Ansible
over SSH with the sim inventories (ad-hoc modules via ansible-runner, results read from events).

If these fail, the deploy tests cannot mean anything: fix the simulation first. The e2e modules
run in the order of their numbers: this one on a fresh cluster, the deploy, recover and safety
modules on that same cluster after it, then the 3-host cluster (TP=3), then teardown.
"""

import socket

import docker
import pytest

from .helpers import ok_results

# CUDA-visible total while DGX OS's modprobe override file was present at boot (rule H2): a fresh
# simulated Spark boots with that file, as a fresh Spark does (tests/fixtures/gb10-sim/README.md).
CUDA_TOTAL_WITH_OVERRIDE = 66571993088
CUDA_TOTAL_WITHOUT = 128522383360  # 119.7 GiB: after modprobe_override removed the file and rebooted


@pytest.fixture(scope="module")
def sim_cluster(sim_manager):
    """This module checks the simulation as it is created (override file present, model on the
    head only): a fresh cluster, whatever ran before it."""
    return sim_manager.ensure(2, fresh=True)


def test_every_host_answers_ansible_over_ssh(sim_cluster, run_adhoc):
    result = run_adhoc("ansible.builtin.ping", "", sim_cluster.inventory)
    by_host = ok_results(result, sim_cluster.hosts)
    assert {h: r.get("ping") for h, r in by_host.items()} == {h: "pong" for h in sim_cluster.hosts}


def test_group_gb10_cluster_has_the_head_first(sim_cluster, run_adhoc):
    # Contract: the first host of gb10_cluster is the head (Ray head, engine driver, rank 0).
    result = run_adhoc("ansible.builtin.debug", "var=groups.gb10_cluster", sim_cluster.inventory,
                       pattern=sim_cluster.head)
    res = ok_results(result, [sim_cluster.head])[sim_cluster.head]
    assert res["groups.gb10_cluster"] == sim_cluster.hosts


def test_each_host_runs_its_own_engine_on_overlay2(sim_cluster, run_adhoc):
    # overlay2 (not vfs) proves the named volume at /var/lib/docker is in place; vfs would copy
    # every layer of the 4 GB serving image.
    result = run_adhoc("ansible.builtin.command", "docker info", sim_cluster.inventory)
    for host, res in ok_results(result, sim_cluster.hosts).items():
        assert "Storage Driver: overlay2" in res["stdout"], (host, res["stdout"])


def test_serving_image_is_on_the_head_only(sim_cluster, run_adhoc):
    # As where it was built (build-and-copy): role serving_image copies it to the others. The worker
    # holds an earlier build (every layer but the shims'), which that copy builds on.
    want = docker.from_env().images.get(sim_cluster.serving_image).id
    result = run_adhoc("ansible.builtin.command", "docker images -q --no-trunc %s" % sim_cluster.image_name,
                       sim_cluster.inventory)
    have = {host: res["stdout"].strip() for host, res in ok_results(result, sim_cluster.hosts).items()}
    assert have == {h: want if h == sim_cluster.head else "" for h in sim_cluster.hosts}, have
    earlier = sim_cluster.serving_image + "-engine"
    result = run_adhoc("ansible.builtin.command", "docker images -q --no-trunc %s" % earlier, sim_cluster.inventory,
                       pattern=sim_cluster.hosts[1])
    assert ok_results(result, [sim_cluster.hosts[1]])[sim_cluster.hosts[1]]["stdout"].strip() == \
        docker.from_env().images.get(earlier).id


@pytest.mark.rule("N3")
def test_each_host_has_a_management_address_and_link_ports_without_one(sim_cluster, run_adhoc):
    # A fresh Spark: SSH on the management network, both twins of the CX7 port up without an
    # address at MTU 1500.
    ports = (sim_cluster.link_port, sim_cluster.twin_port)
    result = run_adhoc("ansible.builtin.shell", "ip -o -4 addr show; for p in %s; do ip -o link show dev $p; done"
                       % " ".join(ports), sim_cluster.inventory)
    for host, res in ok_results(result, sim_cluster.hosts).items():
        lines = res["stdout"].splitlines()
        assert any("inet %s/24" % sim_cluster.ips[host] in line for line in lines), lines
        assert not any(line.split()[1] in ports for line in lines if " inet " in line), lines
        for port in lines[-2:]:
            assert " mtu 1500 " in port and "UP" in port.split("<")[1].split(">")[0].split(","), port


def test_the_controller_reaches_the_hosts_on_the_management_network_only(sim_cluster):
    # An operator's machine is not on the direct cable between the Sparks; whatever the
    # collection sends from the controller (SSH, the benchmark's requests) goes to management
    # addresses. One bounded connection attempt per address.
    for host in sim_cluster.hosts:
        with socket.create_connection((sim_cluster.ips[host], 22), timeout=5) as conn:
            assert conn.recv(4).startswith(b"SSH")
        for address in (sim_cluster.cluster_ips[host], sim_cluster.twin_ips[host]):
            with pytest.raises(OSError):
                socket.create_connection((address, 22), timeout=2).close()


def test_host_network_containers_reach_the_other_host(sim_cluster, run_adhoc):
    # Rule H8's layout: a container of the host's engine with host networking has the host's own
    # address, and reaches the other host there (here: its sshd banner on the management network).
    head, worker = sim_cluster.hosts[0], sim_cluster.hosts[1]
    probe = ("import socket; s = socket.create_connection(('%s', 22), timeout=5); print(s.recv(7).decode())"
             % sim_cluster.ips[worker])
    result = run_adhoc(
        "ansible.builtin.command",
        "docker run --rm --network host --entrypoint sh %s -c \"ip -4 -o addr show; python3 -c \\\"%s\\\"\""
        % (sim_cluster.image_name, probe),
        sim_cluster.inventory, pattern=head, timeout=120)
    out = ok_results(result, [head])[head]["stdout"]
    assert "inet %s/" % sim_cluster.ips[head] in out
    assert out.rstrip().endswith("SSH-2.0"), out


def test_gb10_fixture_answers_through_the_inventory_variables(sim_cluster, run_adhoc):
    result = run_adhoc("ansible.builtin.command",
                       "{{ gb10_nvidia_smi }} --query-gpu=name,driver_version --format=csv,noheader",
                       sim_cluster.inventory)
    for host, res in ok_results(result, sim_cluster.hosts).items():
        assert res["stdout"].strip() == "NVIDIA GB10, 580.142", host
    # Quoted: ad-hoc arguments that start with "{" and end with "}" are read as JSON.
    # A fresh host boots with DGX OS's override file (CUDA sees ~62 GB); once a deploy in this
    # session removed it and rebooted, the whole pool. The probe must agree with the file.
    override = run_adhoc("ansible.builtin.stat", "path=/etc/modprobe.d/zz-nvidia-drm-override.conf",
                         sim_cluster.inventory)
    present = {h: r["stat"]["exists"] for h, r in ok_results(override, sim_cluster.hosts).items()}
    result = run_adhoc("ansible.builtin.command", "'{{ gb10_cuda_probe }}'", sim_cluster.inventory)
    for host, res in ok_results(result, sim_cluster.hosts).items():
        total, free = (int(x) for x in res["stdout"].split())
        want = CUDA_TOTAL_WITH_OVERRIDE if present[host] else CUDA_TOTAL_WITHOUT
        assert total == want and 0 < free <= total, (host, present[host], res["stdout"])
    result = run_adhoc("ansible.builtin.command", "grep -E '^MemTotal:' {{ gb10_proc_root }}/meminfo",
                       sim_cluster.inventory)
    for host, res in ok_results(result, sim_cluster.hosts).items():
        assert res["stdout"].split()[1] == "125510140", host  # 119.7 GiB, one GB10 pool


def test_model_is_on_the_head_only(sim_cluster, run_adhoc):
    # model_sync's job is to copy it to the others; the simulation must not do it for it.
    result = run_adhoc("ansible.builtin.stat", "path=%s/config.json" % sim_cluster.model_path,
                       sim_cluster.inventory)
    exists = {h: r["stat"]["exists"] for h, r in ok_results(result, sim_cluster.hosts).items()}
    assert exists == {h: h == sim_cluster.head for h in sim_cluster.hosts}
