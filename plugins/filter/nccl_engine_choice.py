# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: nccl_engine_choice
short_description: Which transport NCCL took in a serving engine, read from the engine's log
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Reads the serving engine's log (the lines since the launch script's last start line, so the
    running launch's alone), finds the C(NCCL INFO) init lines each Ray worker printed (the
    env file sets C(NCCL_DEBUG=INFO) for the INIT and NET subsystems; Ray forwards the workers'
    output to the engine's log with a C((RayWorkerWrapper pid=..., ip=...)) prefix) and compares
    each NCCL process's choice with the cluster's transport (rule N5).
  - roce and roce_ring want NCCL's IB transport over RoCE devices (those of O(hcas) when given);
    socket wants NCCL's sockets on O(cluster_iface), never loopback.
  - An engine without NCCL lines (the CPU build runs Gloo) gives C(read=false) and no problem.
options:
  _input:
    description:
      - The engine's log (C(engine.log) in its state folder), or a list of logs, one per rank's node
        (vLLM's multi-node executor, where each rank logs in its own node's container).
    type: raw
    required: true
  transport:
    description: The cluster's transport (C(gb10_nccl_transport)).
    type: str
    required: true
    choices: [roce, roce_ring, socket]
  cluster_iface:
    description: The cluster interface NCCL's sockets must use; empty does not check it.
    type: str
  hcas:
    description: The RoCE devices NCCL may use (C(NCCL_IB_HCA)); empty does not check them.
    type: list
    elements: str
'''

EXAMPLES = r'''
- name: NCCL took the cluster's transport in the engine (N5)
  ansible.builtin.assert:
    that: (engine_log | gb10.serving.nccl_engine_choice('roce')).problems | length == 0
'''

RETURN = r'''
_value:
  description: What NCCL took in the engine.
  type: dict
  contains:
    read:
      description: Whether the log held NCCL init lines.
      type: bool
    ranks:
      description: One line per NCCL process, e.g. C(spark2 pid 2981 (rank 1) NET/IB over rocep1s0f1 (RoCE)).
      type: list
      elements: str
    problems:
      description: Each process whose choice is not the transport, with the likely cause; empty when none.
      type: list
      elements: str
    note:
      description: One line for the deploy's summary.
      type: str
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gb10.serving.plugins.module_utils.nccl_log import NcclLogError, engine_choice


def nccl_engine_choice(log_text, transport, cluster_iface=None, hcas=None):
    texts = [to_text(text or '') for text in log_text] if isinstance(log_text, (list, tuple)) else to_text(log_text or '')
    try:
        return engine_choice(texts, transport, cluster_iface=cluster_iface or None,
                             hcas=list(hcas or []) or None)
    except NcclLogError as exc:
        raise AnsibleFilterError('nccl_engine_choice: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'nccl_engine_choice': nccl_engine_choice}
