# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: engine_env
short_description: The environment of the engine process of a model profile
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Merges the profile's C(env) and C(device_env) (rule V1 kernel switches, for example
    C(VLLM_MARLIN_USE_ATOMIC_ADD=1)) into one dictionary of strings for the engine process.
  - Ray's own variables are in the profile's C(ray.env) and belong to C(ray start).
  - With O(engine=sglang), the profile's C(env) plus C(sglang.env) instead (GPU kernel switches
    of vLLM do not apply to SGLang).
options:
  _input:
    description: The profile (merged and validated).
    type: dict
    required: true
  engine:
    description: Which engine's process the environment is for.
    type: str
    choices: [vllm, sglang]
    default: vllm
'''

EXAMPLES = r'''
- name: Environment for docker exec
  ansible.builtin.set_fact:
    engine_environment: "{{ profile | gb10.serving.engine_env }}"
'''

RETURN = r'''
_value:
  description: Variable name to string value.
  type: dict
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.render import engine_env, sglang_env


def _engine_env(profile, engine='vllm'):
    if engine not in ('vllm', 'sglang'):
        raise AnsibleFilterError('engine_env: engine must be vllm or sglang, got %r' % (engine,))
    try:
        return sglang_env(profile) if engine == 'sglang' else engine_env(profile)
    except (KeyError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError('engine_env: profile lacks %s (is the input a profile from lookup '
                                 'gb10.serving.profile?)' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'engine_env': _engine_env}
