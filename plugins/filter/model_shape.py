# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: model_shape
short_description: The attention shape of a model from its Hugging Face config.json
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Reads layers, KV heads and head dim (or, for MLA models, the latent rank and rope dims) from a
    parsed C(config.json), so the fit planner (rule M2) sizes the KV cache from the checkpoint on
    disk rather than from the profile's copy. Returns null when the config lacks those fields.
options:
  _input:
    description: The parsed config.json.
    type: dict
    required: true
'''

EXAMPLES = r'''
- name: Shape of the model on the first host
  ansible.builtin.set_fact:
    shape: "{{ (config.content | b64decode | from_json) | gb10.serving.model_shape }}"
'''

RETURN = r'''
_value:
  description: C(attention), C(num_layers) and C(num_kv_heads)/C(head_dim) or C(kv_lora_rank)/C(qk_rope_head_dim); null when unknown.
  type: dict
'''

from ansible_collections.gb10.serving.plugins.module_utils.fit import shape_from_hf_config


class FilterModule(object):
    def filters(self):
        return {'model_shape': shape_from_hf_config}
