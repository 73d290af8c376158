# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: preflight_problems
short_description: Everything wrong with a profile on a set of nodes, before anything changes
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Runs the preflight checks of C(plugins/module_utils/preflight.py) over the facts that role
    C(gb10.serving.preflight) gathered on every host and returns one message per problem, each
    naming the host, the variable and the fix.
  - Every host of the group in this run (not left out by C(--limit), not unreachable), since the
    head is the group's first host and every host holds a rank; inventory shape vs the profile's
    nodes and duplicate hosts; engine vs profile (S4),
    quantization loader vs checkpoint (V4), load format vs image (V3); utilization ceiling (H6);
    driver branch (H1) unless the same deploy's host prep replaces it (then filter
    C(gb10.serving.preflight_notes) shows it); cluster interface present, up, holding C(gb10_cluster_ip), not loopback,
    not the management NIC (N3, N5); model path present somewhere (M3); memory fit on the poorest
    node (M2, H3-H5).
options:
  _input:
    description: The profile (merged and validated).
    type: dict
    required: true
  nodes:
    description:
      - One dictionary per host of C(gb10_cluster), the first host first, with keys C(host),
        C(ansible_host), C(cluster_ip), C(cluster_iface), C(iface) (C(present), C(active), C(type),
        C(speed), C(ipv4)), C(interfaces), C(driver_version), C(driver_error), C(nvidia_smi),
        C(memory) (C(budget_gib), C(free_gib)), C(model_present), C(in_play) (the host is in
        C(ansible_play_hosts_all)), C(active) (still in C(ansible_play_hosts)) and
        C(driver_host_prep) (the driver branch host prep installs on it, empty when none).
    type: list
    elements: dict
    required: true
  engine:
    description: C(vllm) or C(sglang); defaults to the profile's engine.
    type: str
  shape:
    description: Model shape read from the model's config.json on the first host.
    type: dict
  ceiling:
    description: Highest GPU memory utilization allowed (H6).
    type: float
    default: 0.90
  min_link_mbps:
    description: Slowest link accepted as the cluster interface (N5).
    type: int
    default: 10000
  group:
    description: Name of the cluster group, used in the messages.
    type: str
    default: gb10_cluster
  recover_command:
    description:
      - The command that reboots only the leaked nodes (C(playbooks/recover.yml) with the run's
        inventory), printed when a node whose memory leaked (H4) is why the profile does not fit.
    type: str
    default: null
  executor:
    description: C(ray) or C(mp) (C(gb10_executor)); the fit counts Ray's object store in the start only under Ray.
    type: str
    default: ray
'''

EXAMPLES = r'''
- name: Refuse before changing anything
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join('\n') }}"
  vars:
    problems: "{{ profile | gb10.serving.preflight_problems(nodes=preflight_nodes) }}"
'''

RETURN = r'''
_value:
  description: Problems, one sentence each; empty when everything checks out.
  type: list
  elements: str
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.preflight import (
    MIN_CLUSTER_LINK_MBPS, UTILIZATION_CEILING, preflight_problems)


def _preflight_problems(profile, nodes=None, engine=None, shape=None, ceiling=UTILIZATION_CEILING,
                        min_link_mbps=MIN_CLUSTER_LINK_MBPS, group='gb10_cluster', recover_command=None,
                        executor='ray'):
    if not isinstance(nodes, list):
        raise AnsibleFilterError('preflight_problems: nodes must be a list of per-host facts')
    try:
        return preflight_problems(profile, nodes, engine=engine or None, shape=shape or None,
                                  ceiling=float(ceiling), min_link_mbps=int(min_link_mbps), group=group,
                                  recover_command=recover_command or None, executor=executor or 'ray')
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError('preflight_problems: malformed input: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'preflight_problems': _preflight_problems}
