# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: nginx_servers_on
short_description: The server blocks of nginx's whole configuration that listen on a port
version_added: "0.10.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Reads the output of C(nginx -T) (every file nginx reads, each after its C(# configuration file PATH:)
    line) and returns C(FILE:LINE) of each C(server) block (C(http), C(stream) or C(mail)) that listens on O(port).
  - A server without a C(listen) directive counts as listening on port 80, as nginx does; a Unix socket
    listens on no port.
  - Role C(gb10.serving.api_gateway) refuses a configuration where any server but its own listens on the
    gateway's port (rule A1), which C(nginx -t) passes.
options:
  _input:
    description: The standard output of C(nginx -T).
    type: str
    required: true
  port:
    description: The port.
    type: int
    required: true
'''

EXAMPLES = r'''
- name: The servers on the gateway's port
  ansible.builtin.debug:
    msg: "{{ dump.stdout | gb10.serving.nginx_servers_on(port=8443) }}"
'''

RETURN = r'''
_value:
  description: C(FILE:LINE) of each server block listening on the port, in the order nginx reads them.
  type: list
  elements: str
'''

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils.nginx_config import servers_on


def _nginx_servers_on(dump, port=None):
    if port is None:
        raise AnsibleFilterError('nginx_servers_on: port is required')
    try:
        return servers_on(dump or '', int(port))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError('nginx_servers_on: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'nginx_servers_on': _nginx_servers_on}
