# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: nccl_env_wanted
short_description: The variables of the NCCL/Gloo env file as the deploy writes it
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Reads the registered result of role C(gb10.serving.nccl_env)'s template task, run in check mode
    with diff on (as C(playbooks/drift.yml) does), and returns the variables of the file the deploy
    writes (the diff's C(after) side) as a dictionary.
  - C(playbooks/drift.yml) compares the Ray containers with these, not with a hand-edited file on
    the host. The edit is drift of the file (N1-N6); the containers still run with what the deploy
    gave them (R2).
  - Fails when the result has no diff (the task ran without diff, or did not change).
options:
  _input:
    description: The registered result of the template task (C(nccl_env_file)), changed, with its diff.
    type: dict
    required: true
'''

EXAMPLES = r'''
- name: Compare the Ray containers with the env the deploy writes
  ansible.builtin.include_role:
    name: gb10.serving.serving_containers
  vars:
    serving_containers_env_file: ""
    serving_containers_env: "{{ nccl_env_file | gb10.serving.nccl_env_wanted }}"
'''

RETURN = r'''
_value:
  description: Variable name to value, as the deploy writes them.
  type: dict
'''

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.plugin_utils.drift import parse_env, template_diffs


def nccl_env_wanted(result):
    if not isinstance(result, dict):
        raise AnsibleFilterError('nccl_env_wanted: input must be the registered result of the template task')
    diffs = template_diffs(result)
    if not diffs:
        raise AnsibleFilterError('nccl_env_wanted: the result has no diff; run the template task with diff on')
    return parse_env(diffs[-1].get('after') or '')


class FilterModule(object):
    def filters(self):
        return {'nccl_env_wanted': nccl_env_wanted}
