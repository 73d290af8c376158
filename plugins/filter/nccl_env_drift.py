# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: nccl_env_drift
short_description: Which rule each changed variable of the NCCL/Gloo env file belongs to
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Reads the registered result of role C(gb10.serving.nccl_env)'s template task, run in check mode
    with diff on (as C(playbooks/drift.yml) does), and returns the changed variables grouped by the
    rule each comes from (N1 RoCE pinning, N2 GDR off, N3 socket names, N4 socket fallback, N6 ring).
  - A variable the deploy does not write, or a difference outside the variables, is N1's.
  - A changed result without a diff is N1's, with a note to run with diff on.
options:
  _input:
    description: The registered result of the template task (C(nccl_env_file)).
    type: dict
    required: true
'''

EXAMPLES = r'''
- name: Socket names on the cluster link (N3)
  ansible.builtin.assert:
    that: (nccl_env_file | gb10.serving.nccl_env_drift).N3 is not defined
'''

RETURN = r'''
_value:
  description: Per rule ID, one line per changed variable; empty when the file matches.
  type: dict
'''

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.plugin_utils.drift import env_drift, template_diffs


def nccl_env_drift(result):
    if not isinstance(result, dict):
        raise AnsibleFilterError('nccl_env_drift: input must be the registered result of the template task')
    if not result.get('changed'):
        return {}
    diffs = template_diffs(result)
    if not diffs:
        return {'N1': ['the file differs from what the deploy writes (no diff to say which variables: run with --diff)']}
    out = {}
    for entry in diffs:
        for rule, lines in env_drift(entry.get('before') or '', entry.get('after') or '').items():
            out.setdefault(rule, []).extend(lines)
    return out


class FilterModule(object):
    def filters(self):
        return {'nccl_env_drift': nccl_env_drift}
