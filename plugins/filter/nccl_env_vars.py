# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: nccl_env_vars
short_description: The variables of a node's NCCL/Gloo env file for a transport
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - The one definition of the NCCL/Gloo environment (rules N1-N6), in C(plugins/module_utils/roce.py),
    which C(gb10.serving.roce_facts) returns and C(playbooks/drift.yml) reads the rule of each
    variable from; role C(gb10.serving.nccl_env)'s template renders the file from it.
  - Socket names on the cluster interface (N3), C(MASTER_ADDR), GDR off (N2), NCCL's init lines for
    the transport check (N5), and per transport the RoCE pinning (N1), the ring's per-link routing
    (N6) or sockets chosen on purpose (N4).
options:
  _input:
    description: The transport, C(roce), C(roce_ring) or C(socket).
    type: str
    required: true
  iface:
    description: The cluster interface (NCCL/Gloo socket names).
    type: str
    required: true
  address:
    description: This node's cluster address (C(VLLM_HOST_IP)).
    type: str
    required: true
  head_address:
    description: The head's cluster address (C(MASTER_ADDR)).
    type: str
    required: true
  hcas:
    description: The RoCE devices (C(NCCL_IB_HCA)), for roce and roce_ring.
    type: list
    elements: str
    default: []
  gid_index:
    description: The RoCE v2 IPv4 GID index (C(NCCL_IB_GID_INDEX)), for roce; below 0 for none.
    type: int
    default: -1
  addr_range:
    description: The range covering the ring's link subnets (C(NCCL_IB_ADDR_RANGE)), for roce_ring.
    type: str
    default: ""
'''

EXAMPLES = r'''
- name: The env file's variables
  ansible.builtin.debug:
    msg: "{{ 'roce' | gb10.serving.nccl_env_vars('enp1s0f1np1', '10.0.0.2', '10.0.0.1', ['rocep1s0f1', 'roceP2p1s0f1'], 3) }}"
'''

RETURN = r'''
_value:
  description: Variable name to value.
  type: dict
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.roce import RoceError, nccl_env


def nccl_env_vars(transport, iface, address, head_address, hcas=None, gid_index=-1, addr_range=''):
    try:
        return nccl_env(transport, iface, address, head_address=head_address, hcas=list(hcas or []),
                        gid_index=gid_index, addr_range=addr_range or '')
    except (RoceError, TypeError, ValueError) as exc:
        raise AnsibleFilterError('nccl_env_vars: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'nccl_env_vars': nccl_env_vars}
