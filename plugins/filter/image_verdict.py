# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: image_verdict
short_description: Whether the serving image can serve, from what the image itself answered
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Reads the result of role C(gb10.serving.serving_image)'s probe (C(files/image_probe.py), run with
    C(python3 -c) in a container of the image) and judges it before the image goes to any other node.
  - Refused, each with the image, the finding and the fix; an image that cannot run the probe; one
    without Ray where the executor needs it (R1), or with a Ray older than 2.52 where token
    authentication is on (A3); one that loads no NCCL, or an NCCL older than the transport needs
    (2.30.7 for C(roce_ring), N7), read at runtime with C(ncclGetVersion) from the library the engine
    loads; one that carries an NCCL configuration file (C(/etc/nccl.conf)) (N7); one without a
    package of the profile's C(image_packages) at its commit (V1).
options:
  _input:
    description: The registered result of the probe's C(community.docker.docker_container) task.
    type: dict
    required: true
  image:
    description: The image's name, for the messages.
    type: str
    required: true
  host:
    description: The node the probe ran on, for the messages.
    type: str
    required: true
  need_ray:
    description: Whether the executor needs Ray in the image.
    type: bool
    default: true
  ray_auth:
    description: Whether Ray's token authentication is on (then Ray must be 2.52 or later).
    type: bool
    default: true
  transport:
    description: The cluster's NCCL transport (C(gb10_nccl_transport)).
    type: str
    default: roce
  profile:
    description:
      - The resolved profile the image is for. Where it spans more than one node and captures CUDA graphs
        (no C(enforce-eager), no C(cudagraph_mode) NONE), an NCCL older than 2.30.4 is refused - their collectives
        deadlock in replay (vllm-project/vllm issue 52504).
      - Each Python distribution its C(image_packages) names must be in the image as pip installed it from that
        repository commit (the probe reads pip's C(direct_url.json)).
    type: dict
    default: {}
'''

EXAMPLES = r'''
- name: Judge the image on the source
  ansible.builtin.set_fact:
    image_verdict: >-
      {{ serving_image_probe | gb10.serving.image_verdict(image=serving_image_name, host=inventory_hostname,
         transport=gb10_nccl_transport) }}
'''

RETURN = r'''
_value:
  description: The probe's result, the refusals and a line for the summary.
  type: dict
  contains:
    probe:
      description: What the image answered (ray, nccl, nccl_other, nccl_conf, packages); null when it printed nothing.
      type: dict
    refusals:
      description: One sentence per finding; empty when the image is fit.
      type: list
      elements: str
    report:
      description: Ray, the NCCL the engine loads (runtime version, file, pip or system), the other NCCLs.
      type: str
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gb10.serving.plugins.module_utils.profile import cuda_graphs
from ansible_collections.gb10.serving.plugins.module_utils.serving_image import (
    image_refusals, image_report, parse_image_probe)


def _image_verdict(result, image, host, need_ray=True, ray_auth=True, transport='roce', profile=None):
    if not isinstance(result, dict):
        raise AnsibleFilterError('image_verdict: the input must be the registered result of the probe task')
    container = result.get('container') or {}
    output = container.get('Output') or result.get('msg') or ''
    status = (container.get('State') or {}).get('ExitCode', result.get('status'))
    probe = parse_image_probe(output)
    return {
        'probe': probe,
        'refusals': image_refusals(probe, image, host, status=status, output=output,
                                   need_ray=boolean(need_ray), ray_auth=boolean(ray_auth), transport=transport,
                                   cross_node_graphs=bool(profile) and int(profile.get('nodes', 1)) > 1
                                   and cuda_graphs(profile), packages=(profile or {}).get('image_packages')),
        'report': image_report(probe),
    }


class FilterModule(object):
    def filters(self):
        return {'image_verdict': _image_verdict}
