# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: rdma_container
short_description: Container options that let NCCL use RoCE inside a container
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - For transport C(roce) or C(roce_ring), the options of community.docker.docker_container that
    NCCL needs to open the RoCE devices from inside the container (rule N1) - the
    C(/dev/infiniband) devices, the C(IPC_LOCK) capability, C(memlock) unlimited and a high
    C(nofile) - and C(privileged) when asked for. For C(socket), an empty dictionary.
  - One definition for every container that runs NCCL (the Ray containers, the link probe, SGLang).
options:
  _input:
    description: The transport, C(roce), C(roce_ring) or C(socket).
    type: str
    required: true
  privileged:
    description: Also run the container privileged (some community launchers do; off by default).
    type: bool
    default: false
  limits:
    description:
      - Other values for the containers' C(memlock) (bytes, C(-1) unlimited, what NCCL's registered
        buffers want) and C(nofile) (1048576) limits, only where the machine's Docker cannot grant
        those (cluster-wide C(gb10_rdma_limits); the simulation's cannot).
    type: dict
    default: {}
'''

EXAMPLES = r'''
- name: Ray head with RoCE inside the container
  community.docker.docker_container:
    name: gb10-ray-head
    image: "{{ image }}"
    devices: "{{ rdma.devices | default(omit) }}"
    capabilities: "{{ rdma.capabilities | default(omit) }}"
    ulimits: "{{ rdma.ulimits | default(omit) }}"
    privileged: "{{ rdma.privileged | default(omit) }}"
  vars:
    rdma: "{{ 'roce' | gb10.serving.rdma_container }}"
'''

RETURN = r'''
_value:
  description: C(devices), C(capabilities), C(ulimits) and, when asked, C(privileged); empty for C(socket).
  type: dict
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.roce import RoceError, container_rdma


def _rdma_container(transport, privileged=False, limits=None):
    try:
        return container_rdma(transport, privileged=bool(privileged), limits=limits)
    except RoceError as exc:
        raise AnsibleFilterError('rdma_container: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'rdma_container': _rdma_container}
