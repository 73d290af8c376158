# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: vllm_serve_argv
short_description: The `vllm serve` command line of a model profile, as a list
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Renders a profile from the P(gb10.serving.profile#lookup) lookup into the argv of
    C(vllm serve), starting C(["vllm", "serve", <model path>, ...]); served name, host, port,
    TP size, GPU memory utilization, then the profile's engine args, size args and device args.
  - C(true) renders a bare flag, C(false) renders C(--no-<flag>), mappings render as JSON.
  - Every profile's result is parsed by vLLM's own argument parser in C(tests/engine).
options:
  _input:
    description: The profile (merged and validated).
    type: dict
    required: true
  head_ip:
    description:
      - Cluster address of the first host. With the Ray executor the driver runs inside the Ray
        head container and needs no address (rule R1); with the multi-node C(mp) executor it is
        C(--master-addr) and required; with data parallelism across nodes (C(data_parallel_size)) it
        is C(--data-parallel-address).
    type: str
  port:
    description: API port; defaults to the profile's C(serve.port).
    type: int
  node_rank:
    description: Rank of the node (C(mp) executor only); ranks other than 0 run C(--headless).
    type: int
    default: 0
  master_port:
    description:
      - Where the C(mp) executor's ranks meet on O(head_ip) (C(--master-port), rule X1); vLLM's own
        default (29501) when not given. Ignored with the Ray executor.
      - With data parallelism across nodes the same port is C(--data-parallel-rpc-port), and ranks
        other than 0 also get C(--data-parallel-start-rank).
    type: int
'''

EXAMPLES = r'''
- name: Start the engine inside the Ray head container (R1)
  ansible.builtin.command:
    argv: "{{ ['docker', 'exec', '-d', 'gb10-ray-head'] + (profile | gb10.serving.vllm_serve_argv(head_ip=gb10_cluster_ip)) }}"
  changed_when: true
'''

RETURN = r'''
_value:
  description: The argv list.
  type: list
  elements: str
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.render import RenderError, vllm_serve_argv


def _vllm_serve_argv(profile, head_ip=None, port=None, node_rank=0, master_port=None):
    try:
        return vllm_serve_argv(profile, head_ip=head_ip, port=port, node_rank=int(node_rank),
                               master_port=int(master_port) if master_port else None)
    except (RenderError, KeyError, TypeError) as exc:
        raise AnsibleFilterError('vllm_serve_argv: %s (is the input a profile from lookup gb10.serving.profile?)'
                                 % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'vllm_serve_argv': _vllm_serve_argv}
