# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: api_key_problems
short_description: What makes an API key too weak to guard the engine's endpoint
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - The engine's OpenAI endpoint faces the network and vLLM does not limit wrong keys, so a key
    must resist guessing. A key is refused when it has fewer than O(min_length) characters (32,
    which is ~190 bits of random letters and digits, 128 bits of hex digits), characters other than
    printable ASCII without spaces (it travels in an HTTP header), fewer than 8 different
    characters, a repeated part (C(passwordpassword...)) or mostly a run (C(abcd...), C(1234...)).
  - The sentences never contain the key. An empty key gives no problem (role
    C(gb10.serving.api_key) then generates one of 48 letters and digits).
options:
  _input:
    description: The key.
    type: str
    required: true
  min_length:
    description: Fewest characters.
    type: int
    default: 32
'''

EXAMPLES = r'''
- name: Judge the vaulted key without printing it
  ansible.builtin.set_fact:
    key_problems: "{{ gb10_api_key | gb10.serving.api_key_problems }}"
  no_log: true
'''

RETURN = r'''
_value:
  description: What is wrong, one sentence each; empty for a good key.
  type: list
  elements: str
'''

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils.api_key import MIN_LENGTH, key_problems


def _api_key_problems(key, min_length=MIN_LENGTH):
    try:
        min_length = int(min_length)
    except (TypeError, ValueError):
        raise AnsibleFilterError('api_key_problems: min_length must be a whole number')
    # Never echo the key in an error: anything not a string is judged as its text.
    return key_problems(key, min_length)


class FilterModule(object):
    def filters(self):
        return {'api_key_problems': _api_key_problems}
