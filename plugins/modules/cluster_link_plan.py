#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: cluster_link_plan
short_description: Plan a GB10 node's ConnectX-7 cluster link and its netplan file
version_added: "0.1.0"
description:
  - Validates every host's cluster-link inventory against the others (one mode and MTU, no
    address used twice, no cluster address equal to or in the subnet of a management address,
    one subnet per link of two nodes (in mode pair, one for each twin, apart from each other), a
    full mesh of per-link subnets for three nodes, rules N5 and N6).
  - Chooses this node's ports (O(cluster) entry C(ports), or C(detect) for the net devices of the
    ACTIVE RDMA ports under O(sys_root), the ones C(ibdev2netdev) shows Up) and refuses a count
    the mode cannot use.
  - Refuses a port that carries the management address, a cluster address already on another
    interface, and another netplan file under O(netplan_dir) that configures the same devices.
  - Returns the netplan document of the link (C(content)) and the checks the role runs after
    applying it. Reads only; the role writes the file.
options:
  host:
    description: This node's inventory name; must be the C(host) of one O(cluster) entry.
    type: str
    required: true
  cluster:
    description:
      - One entry per host of the play, each with C(host), C(mode) (C(pair), C(single), C(bond),
        C(mesh)), C(ports) (list or C(detect)), C(address) and C(prefix) (pair, single, bond),
        C(primary) (pair, the port that carries C(address)) and C(twin_address) (pair, the other
        twin's address; empty for the same host part in the next subnet), C(mesh) (for mode mesh,
        per peer host a list of entries with C(port) and C(address) as ip/prefix), C(management)
        (the host's management addresses) and C(mtu).
    type: list
    elements: dict
    required: true
  mtu:
    description: MTU of every port and the bond (9000, jumbo frames).
    type: int
    default: 9000
  bond_name:
    description: Name of the bond in mode C(bond).
    type: str
    default: bond0
  bond_parameters:
    description: netplan C(parameters) of the bond (keys as netplan spells them, e.g. C(mode), C(mii-monitor-interval)).
    type: dict
    default: {}
  renderer:
    description: netplan renderer of the file (C(networkd), C(NetworkManager)); empty leaves the host's global choice.
    type: str
    default: ""
    choices: ["", networkd, NetworkManager]
  optional:
    description: Mark the link's devices C(optional) so that boot does not wait for a peer that is off.
    type: bool
    default: true
  sys_root:
    description: Root of sysfs (C(gb10_sys_root)); tests point it at a fixture tree.
    type: path
    default: /sys
  ip_addr_json:
    description: Output of C(ip -j addr). Empty runs C(ip -j addr) on the node.
    type: str
    default: ""
  netplan_dir:
    description: Directory of the node's netplan files, read for other files that configure the same devices.
    type: path
    default: /etc/netplan
  netplan_file:
    description: File name of the link's own netplan file in O(netplan_dir) (not counted as a conflict).
    type: str
    default: 60-gb10-cluster-link.yaml
  fail_on_problems:
    description: Fail when C(problems) is not empty. False returns them for a report.
    type: bool
    default: true
extends_documentation_fragment:
  - gb10.serving.attributes
  - gb10.serving.attributes.read_only
'''

EXAMPLES = r'''
- name: Plan the cluster link of a pair bonded on one CX7 cable
  gb10.serving.cluster_link_plan:
    host: "{{ inventory_hostname }}"
    cluster:
      - {host: spark1, mode: bond, ports: detect, address: 10.0.0.1, prefix: 24, management: [192.168.1.11], mtu: 9000}
      - {host: spark2, mode: bond, ports: detect, address: 10.0.0.2, prefix: 24, management: [192.168.1.12], mtu: 9000}
    bond_parameters: {mode: 802.3ad, lacp-rate: fast, mii-monitor-interval: 100, transmit-hash-policy: layer3+4}
  register: cluster_link_plan
'''

RETURN = r'''
mode:
  description: The mode planned.
  returned: success
  type: str
  sample: single
ports:
  description: The CX7 net devices the link uses on this node.
  returned: success
  type: list
  elements: str
  sample: [enp1s0f1np1]
interfaces:
  description: The interfaces that carry an address (the port, the bond, or each mesh port), with address and peer (mesh).
  returned: success
  type: list
  elements: dict
  sample: [{iface: enp1s0f1np1, address: 10.0.0.1/24, peer: null}]
checks:
  description: One entry per peer address to verify after applying, with iface, address, peer and peer_ip.
  returned: success
  type: list
  elements: dict
  sample: [{iface: enp1s0f1np1, address: 10.0.0.1/24, peer: spark2, peer_ip: 10.0.0.2}]
document:
  description: The netplan document as data.
  returned: success
  type: dict
  sample: {network: {version: 2, ethernets: {enp1s0f1np1: {mtu: 9000, addresses: [10.0.0.1/24]}}}}
content:
  description: The netplan file's text.
  returned: success
  type: str
  sample: "network:\n  version: 2\n"
problems:
  description: What refuses the plan; each names the host, the variable and the fix. Empty when the plan is good.
  returned: always
  type: list
  elements: str
  sample: []
drift:
  description: How the running node differs from the plan (address missing, MTU); empty when the link is in place, so nothing needs applying.
  returned: success
  type: list
  elements: str
  sample: [enp1s0f1np1 has no IPv4 address, not 10.0.0.1/24]
check_mode:
  description: Whether this run is in check mode (C(--check), or C(check_mode) on the task or an include's C(apply)); the role skips its verification then.
  returned: success
  type: bool
  sample: false
detected:
  description: Net devices of the ACTIVE RDMA ports under sys_root (what ports C(detect) picks from).
  returned: success
  type: list
  elements: str
  sample: [enP2p1s0f1np1, enp1s0f1np1]
'''

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gb10.serving.plugins.module_utils.cluster_link import (
    ClusterLinkError,
    detect_ports,
    live_drift,
    plan,
)
from ansible_collections.gb10.serving.plugins.module_utils.roce import (
    RoceError,
    parse_ip_addr,
    read_rdma,
)


def _other_files(directory, own):
    files = {}
    try:
        names = sorted(os.listdir(directory))
    except (IOError, OSError):
        return files
    for name in names:
        if name == own or not name.endswith('.yaml'):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path) as handle:
                files[path] = handle.read()
        except (IOError, OSError):
            continue
    return files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type='str', required=True),
            cluster=dict(type='list', elements='dict', required=True),
            mtu=dict(type='int', default=9000),
            bond_name=dict(type='str', default='bond0'),
            bond_parameters=dict(type='dict', default={}),
            renderer=dict(type='str', default='', choices=['', 'networkd', 'NetworkManager']),
            optional=dict(type='bool', default=True),
            sys_root=dict(type='path', default='/sys'),
            ip_addr_json=dict(type='str', default=''),
            netplan_dir=dict(type='path', default='/etc/netplan'),
            netplan_file=dict(type='str', default='60-gb10-cluster-link.yaml'),
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
        detected = detect_ports(read_rdma(params['sys_root']))
        try:
            existing = set(os.listdir(os.path.join(params['sys_root'], 'class', 'net')))
        except (IOError, OSError):
            existing = set()
        existing.update(addresses)
        result = plan(params['host'], params['cluster'], detected, existing, addresses,
                      _other_files(params['netplan_dir'], params['netplan_file']),
                      mtu=params['mtu'], bond_name=params['bond_name'],
                      bond_parameters=params['bond_parameters'], renderer=params['renderer'],
                      optional=params['optional'])
    except (RoceError, ClusterLinkError) as exc:
        module.fail_json(msg='host %s: %s' % (params['host'], exc), problems=[str(exc)])
    result['detected'] = detected
    # check mode as the module sees it: --check, or check_mode on the task or an include's apply
    result['check_mode'] = module.check_mode
    try:
        links = json.loads(text)
    except ValueError:
        links = []
    result['drift'] = live_drift(result.get('interfaces') or [], result.get('ports') or [],
                                 links if isinstance(links, list) else [], params['mtu'])
    if result['problems'] and params['fail_on_problems']:
        # the refusal, not a file that will not be written
        result.pop('content', None)
        result.pop('document', None)
        module.fail_json(msg='cluster link refused before anything changed: %s'
                         % ' | '.join(result['problems']), **result)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
