#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: roce_facts
short_description: Read a GB10 node's RoCE devices and choose the NCCL/Gloo environment
version_added: "0.1.0"
description:
  - Enumerates RDMA devices from sysfs (C(<sys_root>/class/infiniband/*/ports/*)), their state,
    rate and GID table (value, C(RoCE v2) or C(IB/RoCE v1), net device), maps them to net devices,
    IPv4 addresses (C(ip -j addr)), MTU and speed (C(<sys_root>/class/net/*/speed)).
  - Picks the RoCE v2 IPv4 GID index for the cluster subnet instead of assuming 3 (rule N1) and
    the HCAs that carry it, and returns the NCCL/Gloo environment for the transport
    (rules N1, N2, N3; C(socket) is the explicit TCP mode of rule N4; C(roce_ring) the switchless
    three-node ring of rule N6, with per-connection GIDs through C(NCCL_IB_ADDR_RANGE) and no
    global C(NCCL_IB_GID_INDEX)).
  - Flags the wrong wire (rule N5) in C(problems) and fails on them unless O(fail_on_problems=false),
    namely the cluster address on a slow management NIC, no RoCE port up, the cluster subnet on no RoCE
    device, HCAs with different GID indexes, ring ports without IPv4 or sharing a subnet, a CX7 port
    count that is neither 2 nor 4, and, given O(peers), nodes that disagree.
  - Reads only; never reports C(changed).
options:
  sys_root:
    description: Root of sysfs (C(gb10_sys_root)); tests point it at a fixture tree.
    type: path
    default: /sys
  cluster_ip:
    description:
      - This node's IPv4 address on the cluster link (C(gb10_cluster_ip)). For C(roce) and
        C(socket) the RoCE link itself; for C(roce_ring) the coordination port (10 GbE).
    type: str
    required: true
  cluster_iface:
    description: Expected interface of O(cluster_ip) (C(gb10_cluster_iface)); a mismatch is a problem. Empty skips the check.
    type: str
    default: ""
  transport:
    description:
      - C(roce) for a pair of nodes (direct link, bond or switch), C(roce_ring) for three nodes
        cabled in a ring without a switch, C(socket) for TCP on purpose.
    type: str
    choices: [roce, roce_ring, socket]
    default: roce
  ip_addr_json:
    description: Output of C(ip -j addr). Empty runs C(ip -j addr) on the node.
    type: str
    default: ""
  min_speed_mbps:
    description: A cluster link slower than this (Mb/s) is a management NIC (rule N5). A ConnectX-7 link runs at 200000.
    type: int
    default: 100000
  peers:
    description:
      - Results of this module on the other nodes (each with C(host)), to check that nodes agree
        on transport, GID index, HCA count, MTU and subnets (rule N5).
    type: list
    elements: dict
    default: []
  fail_on_problems:
    description: Fail when C(problems) is not empty. False returns them for a report.
    type: bool
    default: true
notes:
  - Environment names checked against NCCL's documentation and source (C(NCCL_IB_ADDR_RANGE),
    C(NCCL_IB_ADDR_FAMILY), C(NCCL_IB_MERGE_NICS), C(NCCL_IB_ROCE_VERSION_NUM), C(NCCL_NET_GDR_LEVEL));
    C(NCCL_IB_SUBNET_AWARE_ROUTING) comes from the community's switchless Spark mesh and needs a
    NCCL that knows it; check the image's NCCL version.
extends_documentation_fragment:
  - gb10.serving.attributes
  - gb10.serving.attributes.read_only
'''

EXAMPLES = r'''
- name: Read RoCE facts and the NCCL env for a pair of Sparks
  gb10.serving.roce_facts:
    sys_root: "{{ gb10_sys_root | default('/sys') }}"
    cluster_ip: "{{ gb10_cluster_ip }}"
    cluster_iface: "{{ gb10_cluster_iface | default('') }}"
  register: gb10_roce

- name: Check that all nodes agree
  gb10.serving.roce_facts:
    cluster_ip: "{{ gb10_cluster_ip }}"
    peers: "{{ ansible_play_hosts | difference([inventory_hostname]) | map('extract', hostvars, 'gb10_roce') | list }}"
'''

RETURN = r'''
transport:
  description: The transport the env is for.
  returned: always
  type: str
  sample: roce
cluster_iface:
  description: Interface holding O(cluster_ip).
  returned: always
  type: str
  sample: enp1s0f1np1
cluster_ip:
  description: O(cluster_ip).
  returned: always
  type: str
  sample: 192.168.100.10
cluster_network:
  description: Subnet of O(cluster_ip).
  returned: always
  type: str
  sample: 192.168.100.0/24
cluster_speed_mbps:
  description: Speed of the cluster interface in Mb/s; null when down or unknown.
  returned: always
  type: int
  sample: 200000
cluster_mtu:
  description: MTU of the cluster interface.
  returned: always
  type: int
  sample: 9000
hcas:
  description: RDMA devices NCCL is pinned to (C(NCCL_IB_HCA), rule N1).
  returned: always
  type: list
  elements: str
  sample: [rocep1s0f1, roceP2p1s0f1]
gid_index:
  description: RoCE v2 IPv4 GID index of the cluster subnet (C(roce)); null for C(roce_ring) and C(socket).
  returned: always
  type: int
  sample: 3
addr_range:
  description: C(NCCL_IB_ADDR_RANGE), the smallest network covering the ring's link subnets (C(roce_ring)); else null.
  returned: always
  type: str
  sample: 192.168.96.0/20
ring_links:
  description: For C(roce_ring), one entry per addressed ACTIVE port.
  returned: always
  type: list
  elements: dict
  contains:
    hca:
      description: RDMA device.
      type: str
    iface:
      description: Net device of its IPv4 GID.
      type: str
    ip:
      description: IPv4 address of that GID.
      type: str
    network:
      description: Subnet of the link.
      type: str
    speed_mbps:
      description: Link speed in Mb/s.
      type: int
  sample: [{hca: rocep1s0f0, iface: enp1s0f0np0, ip: 192.168.101.1, network: 192.168.101.0/24, speed_mbps: 200000}]
env:
  description: Environment for NCCL, Gloo and the engine (rules N1-N4, N6) for this node.
  returned: always
  type: dict
  sample: {NCCL_IB_HCA: "rocep1s0f1,roceP2p1s0f1", NCCL_IB_GID_INDEX: "3", NCCL_NET_GDR_LEVEL: "0", GLOO_SOCKET_IFNAME: enp1s0f1np1}
problems:
  description: What is wrong with the data path (rules N5, N6); empty when the wire is right.
  returned: always
  type: list
  elements: str
  sample: []
rdma:
  description: Every RDMA device port as sysfs shows it.
  returned: always
  type: list
  elements: dict
  contains:
    device:
      description: RDMA device name.
      type: str
    port:
      description: Port number.
      type: int
    state:
      description: Port state as sysfs writes it.
      type: str
    active:
      description: The state is ACTIVE.
      type: bool
    rate_gbps:
      description: Port rate in Gb/s.
      type: float
    link_layer:
      description: C(Ethernet) for RoCE.
      type: str
    netdev:
      description: The port's own net device (what ibdev2netdev shows).
      type: str
    gids:
      description: Non-zero GIDs with index, gid, type, ndev and ipv4 (null when not IPv4-mapped).
      type: list
      elements: dict
    pcie:
      description:
        - The PCIe link of the device's function as sysfs shows it (C(current_link_speed), C(current_link_width),
          C(max_link_speed), C(max_link_width) of C(<dev>/device)), what C(lspci -vv) prints as LnkSta and LnkCap.
        - A DGX Spark's functions each run Gen5 x4; a narrower one halves that twin's bandwidth. Null where sysfs has none.
      type: dict
  sample: [{device: rocep1s0f1, port: 1, state: "4: ACTIVE", active: true, rate_gbps: 200.0, link_layer: Ethernet, netdev: enp1s0f1np1, gids: [],
            pcie: {speed: "32.0 GT/s PCIe", width: 4, max_speed: "32.0 GT/s PCIe", max_width: 4}}]
interfaces:
  description: MTU, speed and operstate of every net device named by a GID, a port or an address.
  returned: always
  type: dict
  sample: {enp1s0f1np1: {mtu: 9000, speed_mbps: 200000, operstate: up, ipv4: [192.168.100.10/24]}}
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gb10.serving.plugins.module_utils.roce import (
    DEFAULT_MIN_SPEED_MBPS,
    RoceError,
    compare_nodes,
    parse_ip_addr,
    plan,
    read_netdevs,
    read_rdma,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sys_root=dict(type='path', default='/sys'),
            cluster_ip=dict(type='str', required=True),
            cluster_iface=dict(type='str', default=''),
            transport=dict(type='str', default='roce', choices=['roce', 'roce_ring', 'socket']),
            ip_addr_json=dict(type='str', default=''),
            min_speed_mbps=dict(type='int', default=DEFAULT_MIN_SPEED_MBPS),
            peers=dict(type='list', elements='dict', default=[]),
            fail_on_problems=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    text = params['ip_addr_json']
    if not text.strip():
        ip_cmd = module.get_bin_path('ip', required=True)
        rc, text, err = module.run_command([ip_cmd, '-j', 'addr'])
        if rc != 0:
            module.fail_json(msg='`ip -j addr` failed (rc=%d): %s' % (rc, err.strip()))
    try:
        addresses = parse_ip_addr(text)
        ports = read_rdma(params['sys_root'])
        names = set(addresses)
        for port in ports:
            names.update(gid['ndev'] for gid in port['gids'] if gid['ndev'])
            if port['netdev']:
                names.add(port['netdev'])
        netdevs = read_netdevs(params['sys_root'], sorted(names))
        result = plan(ports, addresses, netdevs, params['cluster_ip'], params['transport'],
                      params['cluster_iface'] or None, params['min_speed_mbps'])
    except RoceError as exc:
        module.fail_json(msg=str(exc))
    if params['peers']:
        facts = {'this node': result}
        for index, peer in enumerate(params['peers']):
            facts[str(peer.get('host') or peer.get('cluster_ip') or 'peer %d' % index)] = peer
        result['problems'].extend(compare_nodes(facts))
    for name, info in netdevs.items():
        info['ipv4'] = [str(addr) for addr in addresses.get(name, [])]
    result.update(rdma=ports, interfaces=netdevs, changed=False)
    if result['problems'] and params['fail_on_problems']:
        module.fail_json(msg='RoCE data path on %s: %s' % (params['cluster_ip'],
                                                           '; '.join(result['problems'])), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
