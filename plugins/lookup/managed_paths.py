# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: managed_paths
short_description: The folders and files the collection's roles write on a node, as each role declares them
version_added: "0.9.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Every role that writes on a node declares where, in its own C(vars/main.yml), as
    C(<role>_managed_paths) (a list of absolute paths, literal, no templating). This lookup reads
    those declarations from the collection's roles and returns their union, sorted, each path once.
  - The converged check (C(playbooks/steps/tasks/converged_state.yml)) reads these paths for a change
    since the last full deploy, the deploy records them before its first change of a node, and
    C(playbooks/reset.yml) puts them back as recorded; the base role's C(gb10_managed_paths) is this
    lookup, so a new role is covered by declaring its own paths.
options: {}
'''

EXAMPLES = r'''
- name: Show what the roles write on a node
  ansible.builtin.debug:
    msg: "{{ lookup('gb10.serving.managed_paths', wantlist=true) }}"
'''

RETURN = r'''
_raw:
  description: The declared paths, sorted, each once.
  type: list
  elements: str
'''

import os

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

try:
    import yaml
except ImportError:  # PyYAML comes with ansible-core; the error says so where it does not
    yaml = None

ROLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'roles')


def declared_paths(roles_dir=ROLES):
    """{role: [paths]} of every role whose vars/main.yml declares <role>_managed_paths."""
    if yaml is None:
        raise AnsibleError('gb10.serving.managed_paths needs PyYAML, which ansible-core installs')
    found = {}
    for role in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, 'vars', 'main.yml')
        if not os.path.isfile(path):
            continue
        with open(path) as handle:
            data = yaml.safe_load(handle) or {}
        key = role + '_managed_paths'
        if key not in data:
            continue
        paths = data[key]
        bad = [item for item in (paths if isinstance(paths, list) else [paths])
               if not isinstance(item, str) or not item.startswith('/') or '{' in item]
        if not isinstance(paths, list) or bad:
            raise AnsibleError('%s: %s must be a list of absolute paths, literal (no templating); it holds %r. '
                               'Fix: list the folders and files the role writes on a node.' % (path, key, bad or paths))
        found[role] = paths
    return found


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        return sorted(set(path for paths in declared_paths().values() for path in paths))
