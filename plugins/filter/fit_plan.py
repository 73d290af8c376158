# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: fit_plan
short_description: Does a model profile fit the poorest node? Weights, KV per token, context that fits
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Rule M2. Weights per node (checkpoint size / TP), KV cache bytes per token from the model shape
    (layers, KV heads, head dim, KV dtype; MLA latent size for DeepSeek), the engine's share of the
    node (budget x gpu_memory_utilization) and the context that fits there.
  - Rule H10. What a warm node keeps available beside the engine, the Ray object store and what
    the node uses besides (the profile's C(fit.host_gib), the field's 16.4 GiB by default), and the
    OOM guard's threshold for it (half of that, at least 1 GiB).
  - Returns C(fits) false with the numbers in C(reason) when the weights leave no room (M2.7 FP8,
    229 GB over two nodes), when the asked context does not fit, when a warm node would keep less
    than the OOM guard's threshold and the same again as margin (H10), or when O(free_gib) is
    below what the engine will claim (H3, H4, H5).
options:
  _input:
    description: The profile (merged and validated).
    type: dict
    required: true
  budget_gib:
    description: Memory CUDA sees on the poorest node, GiB (~119.7 on a Spark).
    type: float
    required: true
  free_gib:
    description: Memory available now on the poorest node, GiB; omitted skips that check.
    type: float
  context:
    description: Tokens one sequence must fit; defaults to the profile's C(size_args.max-model-len).
    type: int
  shape:
    description: Model shape read from the checkpoint's config.json, overriding the profile's.
    type: dict
  pool_gib:
    description:
      - The node's whole unified pool (MemTotal), GiB; defaults to O(budget_gib). What a warm node keeps (H10)
        is judged on it, as CUDA sees all of it once a capping override is gone (H2).
    type: float
  executor:
    description:
      - C(ray) or C(mp) (C(gb10_executor)). The start needs Ray's object store free only under Ray;
        the warm figure (H10) keeps it either way, and the plan's C(object_store_note) says why.
    type: str
    default: ray
'''

EXAMPLES = r'''
- name: Plan the memory of the poorest node
  ansible.builtin.debug:
    msg: "{{ (profile | gb10.serving.fit_plan(budget_gib=119.7)).reason }}"
'''

RETURN = r'''
_value:
  description: The plan.
  type: dict
  contains:
    fits:
      description: Whether weights and KV for the asked context fit.
      type: bool
    reason:
      description: One sentence with the numbers.
      type: str
    weights_per_node_gib:
      description: Weights on each node.
      type: float
    kv_bytes_per_token:
      description: KV cache bytes per token on one node.
      type: int
    context_fits:
      description: Tokens of KV that fit on the poorest node.
      type: int
    warm_available_gib:
      description: Memory a warm serving node is expected to keep available (H10).
      type: float
    oom_guard_gib:
      description: The OOM guard's SIGTERM threshold for that node (H10).
      type: float
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.fit import FitError, fit_plan


def _fit_plan(profile, budget_gib=None, free_gib=None, context=None, shape=None, pool_gib=None, executor='ray'):
    try:
        return fit_plan(profile, float(budget_gib) if budget_gib is not None else None,
                        free_gib=None if free_gib in (None, '') else float(free_gib),
                        context=context or None, shape=shape or None,
                        pool_gib=None if pool_gib in (None, '') else float(pool_gib), executor=executor or 'ray')
    except (FitError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError('fit_plan: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'fit_plan': _fit_plan}
