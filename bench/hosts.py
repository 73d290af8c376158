# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Light benchmark hosts: containers of the test image (sshd + python3 only) on a network of
their own, reached over SSH with a generated key. Every object carries the label
gb10.bench=1 and is removed by that label; only those hosts' addresses are contacted."""
import contextlib
import os
import socket
import subprocess
import time

import docker

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(TOP, 'tests', 'output', 'bench')
LABEL = {'gb10.bench': '1'}
NETWORK = 'gb10-bench-net'
SUBNET = '172.31.232.0/24'
SSH_WAIT_S = 60


def base_image():
    return subprocess.run([os.path.join(TOP, 'tests', 'images', 'build_base.sh')], check=True,
                          stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()


def _ssh_key():
    key = os.path.join(OUT, 'id_ed25519')
    os.makedirs(OUT, exist_ok=True)
    if not os.path.exists(key):
        subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f', key], check=True)
    return key


def remove_all(client):
    for c in client.containers.list(all=True, filters={'label': 'gb10.bench=1'}):
        c.remove(force=True)
    for n in client.networks.list(filters={'label': 'gb10.bench=1'}):
        n.remove()


@contextlib.contextmanager
def light_hosts(count, cap_add=()):
    """Yield (inventory_path, [(name, ip)]) for `count` fresh hosts; remove them afterwards."""
    client = docker.from_env(timeout=300)
    remove_all(client)
    image = base_image()
    key = _ssh_key()
    with open(key + '.pub') as handle:
        pubkey = handle.read()
    ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=SUBNET)])
    network = client.networks.create(NETWORK, driver='bridge', ipam=ipam, labels=LABEL)
    hosts = []
    try:
        for i in range(count):
            name = 'gb10-bench-%02d' % (i + 1)
            ip = '172.31.232.%d' % (10 + i)
            container = client.containers.create(
                image, name=name, hostname=name, labels=LABEL, cap_add=list(cap_add),
                detach=True)
            network.connect(container, ipv4_address=ip)
            client.networks.get('bridge').disconnect(container)
            container.start()
            container.exec_run(['sh', '-c', 'umask 077; mkdir -p /root/.ssh; '
                                'printf "%s" > /root/.ssh/authorized_keys' % pubkey.strip()])
            hosts.append((name, ip))
        for name, ip in hosts:
            _wait_ssh(name, ip)
        inventory = os.path.join(OUT, 'bench-%d.ini' % count)
        with open(inventory, 'w') as handle:
            handle.write('[gb10_bench]\n')
            for idx, (name, ip) in enumerate(hosts):
                handle.write('%s ansible_host=%s gb10_cluster_ip=%s gb10_cluster_iface=eth0\n'
                             % (name, ip, ip))
            # New host keys at repeated addresses each run: these hosts opt out of checking them,
            # as the simulated inventories do (ansible.cfg checks every other inventory's, rule A2).
            handle.write('\n[gb10_cluster:children]\ngb10_bench\n\n[gb10_bench:vars]\n'
                         'ansible_user=root\nansible_ssh_private_key_file=%s\n'
                         'ansible_host_key_checking=false\n'
                         'ansible_ssh_common_args="-o UserKnownHostsFile=/dev/null"\n' % key)
        yield inventory, hosts
    finally:
        remove_all(client)


def _wait_ssh(name, ip):
    deadline = time.monotonic() + SSH_WAIT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((ip, 22), timeout=2) as sock:
                if sock.recv(4).startswith(b'SSH'):
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError('%s: sshd did not answer on %s:22 within %d s' % (name, ip, SSH_WAIT_S))
