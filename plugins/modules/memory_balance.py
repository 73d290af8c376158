#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: memory_balance
short_description: Compare the nodes' free memory before launch and size GPU memory utilization
version_added: "0.1.0"
description:
  - GB10 nodes are not equal after a reboot (a 7 GB gap was seen, from page cache and extra services).
    SGLang refuses to load when one node has less than 90% of another's free memory
    ("The memory capacity is unbalanced"), and a node short of headroom swaps and makes rank 0
    time out (rule H5).
  - Takes every node's memory figures after caches were dropped (the results of
    M(gb10.serving.unified_memory) or the C(after) of M(gb10.serving.drop_page_cache)), fails
    when the spread exceeds O(max_imbalance), and returns the GPU memory utilization fraction
    the poorest node can afford, capped at O(ceiling) (rule H6, never above 0.90).
  - Computes only; run it once for the cluster (C(run_once)). Never reports C(changed).
options:
  nodes:
    description:
      - Per-node figures, keyed by host. Each needs C(available_gib) and C(total_gib); other keys
        are ignored, so a whole C(unified_memory) result can be passed.
    type: dict
    required: true
  max_imbalance:
    description: Largest allowed C((richest - poorest) / richest) free memory. SGLang's check is 10%.
    type: float
    default: 0.10
  ceiling:
    description: Utilization is never above this (rule H6; 0.85-0.87 usual, 0.82 with other services).
    type: float
    default: 0.90
  headroom_gib:
    description: Memory left free on the poorest node beyond what the engine takes (CUDA context, sshd, logs).
    type: float
    default: 1.0
  fail_on_imbalance:
    description: Fail when the spread is above O(max_imbalance). False only reports it (vLLM-only clusters that size by the poorest node).
    type: bool
    default: true
seealso:
  - module: gb10.serving.unified_memory
extends_documentation_fragment:
  - gb10.serving.attributes
  - gb10.serving.attributes.read_only
'''

EXAMPLES = r'''
- name: Size utilization for the poorest node (H5, H6)
  gb10.serving.memory_balance:
    nodes: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'gb10_memory'))) }}"
  run_once: true
  register: gb10_balance

- name: Use it
  ansible.builtin.debug:
    msg: "gpu_memory_utilization {{ gb10_balance.utilization }} (limited by {{ gb10_balance.limited_by }})"
'''

RETURN = r'''
utilization:
  description: Fraction of total memory every node can give the engine, floored to 0.01, at most O(ceiling).
  returned: always
  type: float
  sample: 0.83
limited_by:
  description: The host whose free memory sets C(utilization), or C(ceiling) when every node could afford more.
  returned: always
  type: str
  sample: spark2
poorest:
  description: Host with the least free memory.
  returned: always
  type: str
  sample: spark2
richest:
  description: Host with the most free memory.
  returned: always
  type: str
  sample: spark1
spread_gib:
  description: Free memory of the richest minus the poorest node, GiB.
  returned: always
  type: float
  sample: 7.0
spread_fraction:
  description: C(spread_gib) divided by the richest node's free memory.
  returned: always
  type: float
  sample: 0.0654
balanced:
  description: C(spread_fraction) is within O(max_imbalance).
  returned: always
  type: bool
  sample: true
nodes:
  description: Per-node figures, sorted by host.
  returned: always
  type: list
  elements: dict
  contains:
    host:
      description: Inventory host.
      type: str
    available_gib:
      description: Free memory after dropping caches.
      type: float
    total_gib:
      description: Total memory.
      type: float
    affordable_utilization:
      description: C((available - headroom) / total), floored to 0.01.
      type: float
  sample: [{host: spark1, available_gib: 107.0, total_gib: 119.7, affordable_utilization: 0.88}]
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gb10.serving.plugins.module_utils.memory_balance import (
    MemoryBalanceError,
    balance,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type='dict', required=True),
            max_imbalance=dict(type='float', default=0.10),
            ceiling=dict(type='float', default=0.90),
            headroom_gib=dict(type='float', default=1.0),
            fail_on_imbalance=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not 0 < params['ceiling'] <= 0.90:
        module.fail_json(msg='ceiling must be above 0 and at most 0.90 (rule H6: above it GB10 hits '
                             'OOM and Xid 43 preemption), got %s' % params['ceiling'])
    if not 0 <= params['max_imbalance'] < 1:
        module.fail_json(msg='max_imbalance must be in [0, 1), got %s' % params['max_imbalance'])
    try:
        result = balance(params['nodes'], params['max_imbalance'], params['ceiling'],
                         params['headroom_gib'])
    except MemoryBalanceError as exc:
        module.fail_json(msg=str(exc))
    if not result['balanced'] and params['fail_on_imbalance']:
        rows = dict((row['host'], row) for row in result['nodes'])
        module.fail_json(
            msg='memory is unbalanced: %s has %.1f GiB free, %s has %.1f GiB (%.0f%% less, more than '
                '%.0f%%). SGLang refuses such a launch and the poorer node would swap (rule H5). '
                'On %s: stop other services, drop caches, or run playbooks/recover.yml if memory '
                'leaked.' % (result['poorest'], rows[result['poorest']]['available_gib'],
                             result['richest'], rows[result['richest']]['available_gib'],
                             result['spread_fraction'] * 100, params['max_imbalance'] * 100,
                             result['poorest']),
            **result)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
