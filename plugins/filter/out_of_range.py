# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: out_of_range
short_description: A role's numbers outside their ranges, one message each naming the host, the variable and the fix
version_added: "0.9.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Argument specs check types and choices, not ranges; every role that takes numbers checks them in its first task
    with this filter, so the check and its message are the same everywhere.
  - Each setting is a dict with C(var), C(value) and its bounds - C(min) and C(max) (inclusive), C(above) and
    C(below) (exclusive), or C(choices) (lower-case text). C(number=float) allows a fraction, else the value must be
    a whole number. C(note) is shown in brackets after the range; C(range) replaces the range's text and C(ok) the
    check, for a condition no bound expresses.
options:
  _input:
    description: The settings to check.
    type: list
    elements: dict
    required: true
  host:
    description: The host the settings are for, named in each message.
    type: str
    required: true
'''

EXAMPLES = r'''
- name: Refuse numbers out of range before anything changes
  ansible.builtin.assert:
    that: model_sync_out_of_range | length == 0
    fail_msg: "{{ model_sync_out_of_range | join(' ') }}"
    quiet: true
  vars:
    model_sync_out_of_range: >-
      {{ [{'var': 'model_sync_port', 'value': model_sync_port, 'min': 1, 'max': 65535}]
         | gb10.serving.out_of_range(inventory_hostname) }}
'''

RETURN = r'''
_value:
  description: >-
    One message per setting out of its range, naming the host, the variable, the range and the fix, for example
    C(host spark1: model_sync_port=0 is out of range, it must be 1..65535. Fix: set it within that range, or leave
    it out to get the role's default.); empty when all are in.
  type: list
  elements: str
'''

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils.ranges import RangeError, out_of_range


def _out_of_range(settings, host):
    try:
        return out_of_range(settings, host)
    except RangeError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {'out_of_range': _out_of_range}
