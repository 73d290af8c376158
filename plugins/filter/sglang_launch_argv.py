# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: sglang_launch_argv
short_description: SGLang's multi-node launch command for one node of a model profile
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Renders C(python3 -m sglang.launch_server) for one node with the v0.5.12 flag names (rule S1),
    C(--tp-size), C(--nnodes), C(--node-rank), C(--dist-init-addr head:port), C(--context-length),
    C(--mem-fraction-static), C(--kv-cache-dtype fp8_e4m3); C(--dist-timeout) (S3) and
    C(--disable-cuda-graph) on more than one node (S2).
  - Fails with the reason and the working alternative for a profile SGLang cannot serve (S4).
options:
  _input:
    description: The profile (merged and validated).
    type: dict
    required: true
  head_ip:
    description: Cluster address of the first host (rank 0), used in C(--dist-init-addr).
    type: str
    required: true
  node_rank:
    description: This node's rank, 0 for the first host.
    type: int
    required: true
  port:
    description: API port; defaults to the profile's C(serve.port).
    type: int
'''

EXAMPLES = r'''
- name: Command of this node
  ansible.builtin.set_fact:
    sglang_argv: "{{ profile | gb10.serving.sglang_launch_argv(head_ip=head_ip, node_rank=ansible_play_hosts.index(inventory_hostname)) }}"
'''

RETURN = r'''
_value:
  description: The argv list.
  type: list
  elements: str
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.render import RenderError, sglang_launch_argv


def _sglang_launch_argv(profile, head_ip=None, node_rank=None, port=None):
    try:
        return sglang_launch_argv(profile, head_ip=head_ip, node_rank=int(node_rank), port=port)
    except (RenderError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError('sglang_launch_argv: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'sglang_launch_argv': _sglang_launch_argv}
