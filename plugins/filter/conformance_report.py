# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: conformance_report
short_description: The conformance report of a cluster from what its nodes measured
version_added: "0.10.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Every figure the rules and the simulation's fixture kit rest on, as each node measured it
    (unified memory and CUDA's view, driver, the modprobe override, the OOM guard, the link, and what
    the head's running serving container answers of its Ray, NCCL and Triton), and a
    verdict per rule ID (C(holds), C(fails) or C(not measured), with the figure).
  - MAC addresses, GPU UUIDs and serial numbers are redacted, and IPv4 addresses unless
    O(addresses) is true.
  - Used by C(playbooks/report.yml), which writes the JSON and the Markdown page.
options:
  _input:
    description: The nodes' entries by host name.
    type: dict
    required: true
  cluster:
    description: The cluster's name (its head's).
    type: str
    required: true
  generated_at:
    description: When the figures were read (ISO 8601).
    type: str
    required: true
  addresses:
    description: Keep IPv4 addresses in the report.
    type: bool
    default: false
'''

EXAMPLES = r'''
- name: Build the report
  ansible.builtin.set_fact:
    report: "{{ nodes | gb10.serving.conformance_report(cluster='spark1', generated_at=now(utc=true).isoformat()) }}"
'''

RETURN = r'''
_value:
  description: The report and its page.
  type: dict
  contains:
    report:
      description: format, generated_at, cluster, nodes (redacted) and verdicts (rule, verdict, figure).
      type: dict
    markdown:
      description: The page a person reads.
      type: str
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.report import build, markdown


def _conformance_report(nodes, cluster=None, generated_at=None, addresses=False):
    if not isinstance(nodes, dict) or not cluster or not generated_at:
        raise AnsibleFilterError('conformance_report: nodes (a dict by host), cluster and generated_at are required')
    try:
        report = build(nodes, cluster, generated_at, addresses=bool(addresses))
        return {'report': report, 'markdown': markdown(report)}
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError('conformance_report: malformed input: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'conformance_report': _conformance_report}
