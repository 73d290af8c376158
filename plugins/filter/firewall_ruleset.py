# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: firewall_ruleset
short_description: The node's default-deny nftables table (rule A4), IPv4 and IPv6
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Renders the file that C(nft -f) loads, table C(inet gb10_serving), replaced whole in one
    transaction, with an input chain whose policy is drop. Loopback, established traffic, ICMP and
    ICMPv6 pass. The cluster passes on its cluster interfaces from its cluster addresses (both must
    match). SSH and the API port are open to their sources, the metrics port to its sources; every
    other packet is refused with a TCP reset or ICMP administratively prohibited.
  - Every address is parsed as an address or network and every interface name checked before
    anything is rendered; a bad value fails with the variable's name, so nothing can be injected
    into the rules.
options:
  _input:
    description: The cluster link's interfaces (C(firewall_cluster_ifaces)).
    type: list
    elements: str
    required: true
  cluster_sources:
    description: The nodes' cluster addresses or networks.
    type: list
    elements: str
    required: true
  ssh_port:
    description: SSH's port, open to everyone.
    type: int
    required: true
  api_port:
    description: The API gateway's port.
    type: int
    required: true
  api_sources:
    description: Who may reach the API port (C(0.0.0.0/0) and C(::/0) for everyone).
    type: list
    elements: str
    required: true
  metrics_port:
    description: Role node_metrics' port; 0 for none.
    type: int
    default: 0
  metrics_sources:
    description: Who may reach the metrics port.
    type: list
    elements: str
    default: []
  open_tcp:
    description: Further TCP ports of the operator's own, each C({port, sources}).
    type: list
    elements: dict
    default: []
  managed:
    description: A header line (C(ansible_managed)).
    type: str
    default: ''
  engine_ports:
    description:
      - The keyless engine's ports on the node's loopback. An output chain resets the connection of every local
        process whose user is not in O(engine_uids) (rule A1). Empty adds no output chain.
    type: list
    elements: int
    default: []
  engine_uids:
    description: The user IDs that may connect to O(engine_ports) (root, 0, always).
    type: list
    elements: int
    default: []
'''

EXAMPLES = r'''
- name: Render the node's table
  ansible.builtin.copy:
    content: >-
      {{ ['enp1s0f1np1'] | gb10.serving.firewall_ruleset(['10.0.0.1', '10.0.0.2'], 22, 8443, ['0.0.0.0/0', '::/0']) }}
    dest: /etc/gb10/firewall.nft
    mode: "0600"
'''

RETURN = r'''
_value:
  description: The nftables file's text.
  type: str
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.firewall import FirewallError, ruleset


def _firewall_ruleset(cluster_ifaces, cluster_sources, ssh_port, api_port, api_sources, metrics_port=0,
                      metrics_sources=None, open_tcp=None, managed='', engine_ports=None, engine_uids=None):
    try:
        return ruleset(cluster_ifaces, cluster_sources, ssh_port, api_port, api_sources, metrics_port=metrics_port,
                       metrics_sources=metrics_sources or [], open_tcp=open_tcp or [], managed=managed,
                       engine_ports=engine_ports or [], engine_uids=engine_uids or [])
    except FirewallError as exc:
        raise AnsibleFilterError('firewall_ruleset: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'firewall_ruleset': _firewall_ruleset}
