# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: cluster_status
short_description: One look at the cluster - what serves, each node's figures, the command that serves again
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Used by C(playbooks/status.yml). Takes what the playbook read, read-only, and returns the status document and
    the lines a person reads.
  - Each node's figures come from its own exporter (role node_metrics, O6) - the unified memory split as module
    unified_memory splits it (the engine's hold, the page cache, what is free, the leak verdict, H4), the link's
    last measurement (N5) and, on the head, the watchdog's state (O4).
  - When the engine does not serve the recorded launch, the document says why and names one command - recover.yml
    where a node leaked (only a reboot frees that memory), else the launch step.
options:
  _input:
    description:
      - profile, overlay, executor, nodes (the head first), engine (role vllm_serve's probe with C(serving)),
        exporters (host to the exporter's text, empty where it did not answer), containers and firewall (host to
        a word each), image (tag, id), versions (package to version), endpoint, key_file, ca_file, keys
        (client to the first 12 hex digits of its key's SHA-256), commands (recover, launch).
    type: dict
    required: true
'''

EXAMPLES = r'''
- name: Build the status
  ansible.builtin.set_fact:
    status: "{{ status_facts | gb10.serving.cluster_status }}"
'''

RETURN = r'''
_value:
  description: The status and its screen.
  type: dict
  contains:
    status:
      description: serving, why, fix, endpoint, launch, image, engine, watchdog and nodes (figures per node).
      type: dict
    lines:
      description: The screen a person reads, the verdict first.
      type: list
      elements: str
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.status import build, lines


def _cluster_status(facts):
    if not isinstance(facts, dict):
        raise AnsibleFilterError('cluster_status: a dict of what the playbook read is required')
    try:
        status = build(facts)
        return {'status': status, 'lines': lines(status)}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError('cluster_status: malformed input: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'cluster_status': _cluster_status}
