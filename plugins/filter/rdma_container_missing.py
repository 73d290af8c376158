# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: rdma_container_missing
short_description: What a container lacks for NCCL to use RoCE inside it
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Compares a container's C(HostConfig) (from community.docker.docker_container_info) with what
    gb10.serving.rdma_container gives for the transport, and names what is missing - no
    C(/dev/infiniband) device, no C(IPC_LOCK) capability, C(memlock) not unlimited. Empty when
    nothing is missing, the container is privileged, or the transport is C(socket).
  - A failed transport check (rule N5) names these as the likely cause, before the env file.
options:
  _input:
    description: The container's C(HostConfig).
    type: dict
    required: true
  transport:
    description: The cluster's transport, C(roce), C(roce_ring) or C(socket).
    type: str
    required: true
  limits:
    description: The limits the containers were given (gb10.serving.rdma_container's C(limits)).
    type: dict
    default: {}
'''

EXAMPLES = r'''
- name: Name what the head container lacks for RoCE
  ansible.builtin.debug:
    msg: "{{ head_info.container.HostConfig | gb10.serving.rdma_container_missing('roce') }}"
'''

RETURN = r'''
_value:
  description: Short phrases, one per missing setting; empty when none is missing.
  type: list
  elements: str
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.roce import RoceError, container_rdma_missing


def _rdma_container_missing(host_config, transport, limits=None):
    try:
        return container_rdma_missing(transport, host_config, limits=limits)
    except RoceError as exc:
        raise AnsibleFilterError('rdma_container_missing: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'rdma_container_missing': _rdma_container_missing}
