#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: link_check_eval
short_description: Read one rank's all-reduce probe output and NCCL's transport choice, against a floor
version_added: "0.1.0"
description:
  - NCCL on the wrong wire fails nothing, it is only slow (rule N5; ~6 tok/s at TP=3 over the 1 GbE
    management NIC). Reads what the probe of the C(link_check) role printed on this node (its
    C(GB10_LINK_PROBE) JSON line and, under NCCL, NCCL's init lines) and returns the bus bandwidth,
    the plain TCP figure the probe measured between the same cluster addresses, the transport each
    NCCL process took, and every problem found.
  - Bus bandwidth as nccl-tests defines it for all-reduce, S/t times 2(n-1)/n for n ranks.
  - Computes only; never reports C(changed) and never fails on a low figure (the role does, naming
    every node). Fails only on output that holds no probe result.
options:
  output:
    description: Everything the probe container printed (stdout and stderr).
    type: str
    required: true
  transport:
    description: The profile's transport, as C(nccl_env) wrote it.
    type: str
    required: true
    choices: [roce, roce_ring, socket]
  floor_gbit:
    description:
      - Lowest acceptable busbw in Gb/s for this transport, whatever the link is rated for; the
        floor used is the larger of this and O(rated_share) times the rating (RV(floor_gbit)).
    type: float
    required: true
  rated_share:
    description:
      - Lowest acceptable busbw as a share of what the link is rated for (roce, roce_ring), where
        each HCA of O(hcas) is a ConnectX-7 twin of O(twin_gbit) and a ring node's HCAs are split over its
        two peers. C(0) or no O(hcas) does not compare. A link at half its rate (one twin of the
        pair carrying it all) is refused this way with both figures.
    type: float
    default: 0
  twin_gbit:
    description: What one ConnectX-7 twin (a PCIe x4 link of a Spark's CX7 port) is rated for, Gb/s.
    type: float
    default: 100
  tcp_share:
    description:
      - Lowest acceptable busbw as a share of the plain TCP figure the probe measured between the
        same cluster addresses (its C(tcp) entry). C(0) does not compare.
    type: float
    default: 0
  cluster_iface:
    description: The cluster interface; NCCL's sockets elsewhere are a problem (N3, N5).
    type: str
  hcas:
    description: The RoCE devices of C(NCCL_IB_HCA); NCCL on others is a problem (N1).
    type: list
    elements: str
  bonded:
    description:
      - The twins are bonded into one interface (cluster link mode C(bond)); the link is rated as one twin, since
        RDMA over the bond runs over one of them at a time (a working bond0 measured 109 Gb/s RDMA).
    type: bool
    default: false
seealso:
  - module: gb10.serving.roce_facts
extends_documentation_fragment:
  - gb10.serving.attributes
  - gb10.serving.attributes.read_only
'''

EXAMPLES = r'''
- name: Read the probe's output
  gb10.serving.link_check_eval:
    output: "{{ link_check_run.container.Output }}"
    transport: roce
    floor_gbit: 50
    rated_share: 0.6
    tcp_share: 0
    cluster_iface: enp1s0f1np1
    hcas: [rocep1s0f1, roceP2p1s0f1]
  register: link_check_eval
'''

RETURN = r'''
probe:
  description: This rank's JSON result as the probe printed it.
  returned: always
  type: dict
  sample: {rank: 0, world_size: 2, bytes: 268435456, seconds_per_iter: 0.0213, busbw_gbit_s: 100.8}
busbw_gbit:
  description: Bus bandwidth in Gb/s recomputed from bytes, seconds and ranks.
  returned: always
  type: float
  sample: 100.8
floor_gbit:
  description: The floor applied, Gb/s, the larger of O(floor_gbit) and O(rated_share) times the rating.
  returned: always
  type: float
  sample: 120.0
below_floor:
  description: Why the figure is below RV(floor_gbit), or null.
  returned: always
  type: str
tcp_gbit:
  description: The lowest plain TCP figure to rank 0 in Gb/s, or null where the probe measured none.
  returned: always
  type: float
  sample: 9.4
tcp_errors:
  description: Ranks whose TCP reference failed, with the error.
  returned: always
  type: list
  elements: str
below_tcp_share:
  description: Why the figure is below O(tcp_share) times RV(tcp_gbit), or null.
  returned: always
  type: str
nccl:
  description: One line per NCCL process in the output, what it took (empty under Gloo).
  returned: always
  type: list
  elements: str
  sample: ["spark1 pid 77 (rank 0): NET/IB over rocep1s0f1, roceP2p1s0f1 (RoCE)"]
nccl_problems:
  description: Mismatches between NCCL's choice and O(transport), each with its likely cause.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gb10.serving.plugins.module_utils.link_probe import (
    LinkProbeError,
    below_floor,
    below_tcp_share,
    bus_bandwidth,
    gbit_per_s,
    parse_probe_output,
    rated_floor,
    tcp_reference,
)
from ansible_collections.gb10.serving.plugins.module_utils.nccl_log import (
    NcclLogError,
    check_transport,
    describe,
    parse_init_log,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            output=dict(type='str', required=True),
            transport=dict(type='str', required=True, choices=['roce', 'roce_ring', 'socket']),
            floor_gbit=dict(type='float', required=True),
            rated_share=dict(type='float', default=0.0),
            twin_gbit=dict(type='float', default=100.0),
            tcp_share=dict(type='float', default=0.0),
            cluster_iface=dict(type='str'),
            hcas=dict(type='list', elements='str'),
            bonded=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        probe = parse_probe_output(params['output'])[0]
        busbw = gbit_per_s(bus_bandwidth(probe['bytes'], probe['seconds_per_iter'], probe['world_size'])[1])
        floor, why = rated_floor(params['transport'], len(params['hcas'] or []), params['floor_gbit'],
                                 params['rated_share'], params['twin_gbit'], bonded=params['bonded'])
        low = below_floor(probe, floor, why)
        low_share = below_tcp_share(probe, params['tcp_share'])
        tcp_gbit, tcp_errors = tcp_reference(probe)
    except LinkProbeError as exc:
        module.fail_json(msg='%s; the probe printed: %s' % (exc, params['output'][-2000:]))
    nccl, problems = [], []
    if probe.get('backend') == 'nccl':
        try:
            parsed = parse_init_log(params['output'])
        except NcclLogError as exc:
            problems = [str(exc)]
        else:
            nccl = [describe(proc) for proc in parsed['processes']]
            problems = check_transport(parsed, params['transport'], cluster_iface=params['cluster_iface'] or None,
                                       hcas=params['hcas'] or None)
    module.exit_json(changed=False, probe=probe, busbw_gbit=round(busbw, 3), floor_gbit=round(floor, 3), below_floor=low,
                     tcp_gbit=None if tcp_gbit is None else round(tcp_gbit, 3), tcp_errors=tcp_errors,
                     below_tcp_share=low_share, nccl=nccl, nccl_problems=problems)


if __name__ == '__main__':
    main()
