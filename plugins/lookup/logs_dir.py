# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: logs_dir
short_description: The controller folder for the collection's logs when gb10_logs_dir is not set
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Returns the cluster-wide C(gb10_logs_dir) when it is set; else C(<gb10_controller_dir>/logs) when
    C(gb10_controller_dir) is set (the one folder of the collection's state, see lookup
    C(gb10.serving.controller_dir)); else C($XDG_STATE_HOME/gb10-serving/logs), or
    C(~/.local/state/gb10-serving/logs) when C(XDG_STATE_HOME) is not set, as the controller's
    environment has them.
  - The one definition of where the controller's logs go, for container logs of a failed start,
    the link check's report and the benchmark's JSON - roles and playbooks call it
    instead of repeating the fallback. Never a folder of the playbook or of the installed
    collection, where nothing may be written.
  - Takes no terms. The folder is not created.
'''

EXAMPLES = r'''
- name: Where this run's logs go (gb10_logs_dir, else the XDG state folder)
  ansible.builtin.debug:
    msg: "{{ lookup('gb10.serving.logs_dir') }}"
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

from ansible_collections.gb10.serving.plugins.module_utils.controller_dir import logs_dir


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        if terms:
            raise AnsibleError("lookup('gb10.serving.logs_dir') takes no terms, got %r" % (terms,))
        # A value set as a template ("{{ playbook_dir }}/logs") is rendered as any variable is.
        configured = [str(self._templar.template(value)) if value else ''
                      for value in ((variables or {}).get('gb10_logs_dir'), (variables or {}).get('gb10_controller_dir'))]
        return [logs_dir(configured[0], configured[1], os.environ)]
