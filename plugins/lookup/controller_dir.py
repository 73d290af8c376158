# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: controller_dir
short_description: The controller folder the collection keeps its keys, CA, reports and logs in
version_added: "0.2.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Returns C(gb10_controller_dir) when it is set, else C(~/.config/gb10-serving) of the
    controller's user; with terms, those path parts joined below it.
  - The one definition of where the client keys, the cluster's CA and the head's certificate and
    the reports live on the controller (and the logs, when C(gb10_controller_dir) is set and
    C(gb10_logs_dir) is not; see lookup C(gb10.serving.logs_dir)).
  - A runner that starts every job in a fresh container (ansible-navigator, AWX) keeps them by
    mounting one folder and setting C(gb10_controller_dir) to where it is mounted; without that,
    every run would make new client keys and a new CA.
  - The folder is not created.
'''

EXAMPLES = r'''
- name: Where the reports go
  ansible.builtin.debug:
    msg: "{{ lookup('gb10.serving.controller_dir', 'reports') }}"
'''

RETURN = r'''
_raw:
  description: One absolute path.
  type: list
  elements: str
'''

import os

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gb10.serving.plugins.module_utils.controller_dir import controller_dir


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        configured = (variables or {}).get('gb10_controller_dir')
        # A value set as a template ("{{ playbook_dir }}/state") is rendered as any variable is.
        base = controller_dir(str(self._templar.template(configured)) if configured else '', os.environ)
        parts = [to_text(term) for term in terms]
        if any(os.path.isabs(part) or '..' in part.split('/') for part in parts):
            raise AnsibleError("lookup('gb10.serving.controller_dir') takes parts below the folder, got %r" % (terms,))
        return [os.path.join(base, *parts)]
