# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: triton_ptxas_env
short_description: The environment that points every generation of Triton at one assembler
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Rule H7. Triton up to 3.5 reads C(TRITON_PTXAS_PATH); Triton 3.6 and later pick the assembler per
    architecture and read C(TRITON_PTXAS_BLACKWELL_PATH) for C(arch >= 100), so for a GB10 (sm_121).
    This filter gives both, set to the CUDA toolkit's ptxas, so a container is right for the Triton
    its image carries from its first kernel.
  - One definition for every container that runs Triton (the Ray containers, SGLang).
options:
  _input:
    description: Path of the CUDA toolkit's ptxas inside the container; empty gives no variable.
    type: str
    required: true
'''

EXAMPLES = r'''
- name: Ray head whose Triton uses the toolkit's ptxas
  community.docker.docker_container:
    name: gb10-ray-head
    image: "{{ image }}"
    env: "{{ '/usr/local/cuda/bin/ptxas' | gb10.serving.triton_ptxas_env }}"
'''

RETURN = r'''
_value:
  description: C(TRITON_PTXAS_PATH) and C(TRITON_PTXAS_BLACKWELL_PATH) set to the input; empty for an empty input.
  type: dict
'''

from ansible_collections.gb10.serving.plugins.module_utils.triton_ptxas import ptxas_env


class FilterModule(object):
    def filters(self):
        return {'triton_ptxas_env': ptxas_env}
