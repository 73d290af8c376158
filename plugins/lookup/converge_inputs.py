# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: converge_inputs
short_description: The key of what a deploy converges a node to - the collection, the inventory and the variables
version_added: "0.9.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - A SHA-256 over the content of this collection's roles, playbooks, plugins and profiles, the
    cluster group's hosts, and every variable of the host whose name starts with C(gb10_) or with
    one of the collection's role names (C(vllm_serve_), C(cluster_link_)...), as templated now.
  - The deploy stamps each node with it after a full run (C(gb10.serving.converged_state)); a
    later run whose key is the same, on nodes that read as they were stamped, skips to the smoke
    test. A new version of the collection, another profile, an C(-e) override or an
    inventory change gives another key, hence a full run.
  - Variables the deploy sets while it runs (C(gb10_deploy_*), C(gb10_converge_*)) and the run's
    mode C(gb10_converge) do not count; call it before the run sets any other.
  - The site's own recipes (the files of C(gb10_profiles_dir), when set) count as content too, so a
    changed recipe there is a changed launch.
  - Values are hashed, never returned (a vaulted API key or hub token stays secret).
options:
  group:
    description: The cluster's inventory group.
    type: str
    default: gb10_cluster
'''

EXAMPLES = r'''
- name: Remember the key of this run's inputs (the first task of the run)
  ansible.builtin.set_fact:
    gb10_converge_inputs: "{{ lookup('gb10.serving.converge_inputs') }}"
  no_log: true
'''

RETURN = r'''
_raw:
  description: One hex SHA-256.
  type: list
  elements: str
'''

import hashlib
import json
import os
import re

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTENT = ('roles', 'playbooks', 'plugins', 'profiles')
# Set by the deploy itself while it runs, or how it runs (gb10_converge=full), so not an input.
RUN_FACTS = re.compile(r'^gb10_(deploy_|converge$|converge_)')


def content_digest(root, parts=CONTENT):
    """SHA-256 over the relative path and bytes of every file of the collection's content (no
    caches), the same for a checkout and for the collection built and installed from it."""
    sha = hashlib.sha256()
    for part in parts:
        for folder, dirs, names in os.walk(os.path.join(root, part)):
            dirs[:] = sorted(d for d in dirs if d != '__pycache__' and not d.startswith('.'))
            for name in sorted(names):
                if name.endswith('.pyc') or name.startswith('.'):
                    continue
                path = os.path.join(folder, name)
                sha.update(os.path.relpath(path, root).encode('utf-8') + b'\0')
                with open(path, 'rb') as handle:
                    sha.update(handle.read())
                sha.update(b'\0')
    return sha.hexdigest()


def site_recipes_digest(site):
    """The digest of the site's own recipes (gb10_profiles_dir): they are inputs like the
    collection's profiles, so a changed image or flag there is a changed launch (O2). '' when the
    variable is empty or names no folder."""
    if not isinstance(site, str) or not site or not os.path.isdir(site):
        return ''
    site = os.path.abspath(site)
    return content_digest(os.path.dirname(site), (os.path.basename(site),))


def input_names(names, roles):
    prefix = re.compile(r'^(gb10|%s)_' % '|'.join(re.escape(r) for r in sorted(roles)))
    return sorted(n for n in names if prefix.match(n) and not RUN_FACTS.match(n))


def inputs_digest(content, hosts, values):
    document = json.dumps({'content': content, 'hosts': hosts, 'vars': values}, sort_keys=True, default=str)
    return hashlib.sha256(document.encode('utf-8')).hexdigest()


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}
        roles = os.listdir(os.path.join(COLLECTION, 'roles'))
        values = {}
        for name in input_names(variables, roles):
            try:
                values[name] = self._templar.template(variables[name])
            except AnsibleError:
                # A variable that only templates inside its role (it names the role's defaults)
                # counts as written.
                values[name] = variables[name]
        # Each host's own variables are in its key; the cluster's members are in every key (a node
        # joining or leaving changes what every node converges to: TP, firewall, trust).
        hosts = list((variables.get('groups') or {}).get(self.get_option('group'), []))
        content = content_digest(COLLECTION) + site_recipes_digest(values.get('gb10_profiles_dir'))
        return [inputs_digest(content, hosts, values)]
