# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: preflight_notes
short_description: What preflight saw wrong that the same deploy fixes later
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Companion of filter C(gb10.serving.preflight_problems), over the same per-host facts.
  - H1, a node runs a driver branch other than 580 (590 deadlocks CUDA graphs on GB10) and the
    calling play's host prep replaces it (role C(gb10.serving.preflight) sets C(driver_host_prep)
    from C(preflight_host_prep_follows) and the host's C(nvidia_driver_install)).
  - M3, the model is on no host and the first host's C(model_download) is set
    (C(gb10_model_download)), so C(gb10.serving.model_sync) downloads it there.
  - Such a node is not refused; this filter says what will be fixed.
options:
  _input:
    description: Per-host facts, as for C(gb10.serving.preflight_problems) (its O(nodes) option).
    type: list
    elements: dict
    required: true
'''

EXAMPLES = r'''
- name: Show what host prep will fix
  ansible.builtin.debug:
    msg: "{{ preflight_nodes | gb10.serving.preflight_notes }}"
'''

RETURN = r'''
_value:
  description: Notes, one sentence each naming the host; empty when there is nothing to say.
  type: list
  elements: str
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.preflight import preflight_notes


def _preflight_notes(nodes):
    if not isinstance(nodes, list):
        raise AnsibleFilterError('preflight_notes: input must be a list of per-host facts')
    try:
        return preflight_notes(nodes)
    except (KeyError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError('preflight_notes: malformed input: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'preflight_notes': _preflight_notes}
