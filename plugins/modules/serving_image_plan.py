#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: serving_image_plan
short_description: Plan how the serving image reaches every GB10 node
version_added: "0.1.0"
description:
  - From what every node of the cluster reported (the image's ID or none, its cluster address,
    whether it has the cluster-key gate, its Docker version), chooses the
    source node (O(source), else the first node, the head; a node that has the image when the
    head does not), whether the image is pulled there first (only when no node has it), and which
    nodes get a copy over the cluster link (those without it or with another image ID).
  - Refuses before anything changes, each message naming the host, the variable and the fix (an
    image on no node with no way to get it, holders that disagree on the ID without the source, a
    node to copy to without C(gb10_cluster_ip) or without the cluster-key gate).
  - Pure planning; reads nothing on the node and changes nothing.
options:
  image:
    description: The profile's image reference.
    type: str
    required: true
  nodes:
    description:
      - One entry per host of the group, in the group's order, with C(host), C(id) (the image ID,
        empty when the node lacks it), C(cluster_ip), C(gate_load) (bool), C(client) (bool, the
        node has the cluster ssh client), C(zstd) (bool), C(docker_version) and optionally
        C(link_ips) (a dict, each peer's address over this node's own link to it, as role
        gb10.serving.cluster_link verified it; a copy from this node goes there, else to the
        target's C(cluster_ip)), C(layers) (the image's C(RootFS.Layers) where the node has it) and
        C(images_layers) (the C(RootFS.Layers) of every image on the node, the layers a copy to it
        can leave out).
    type: list
    elements: dict
    required: true
  source:
    description: The preferred source host; empty for the first of O(nodes).
    type: str
    default: ""
  pull:
    description: C(auto) pulls a registry reference (a name whose first part is a registry host) only; C(always) any name; C(never) none.
    type: str
    default: auto
    choices: [auto, always, never]
  build_recipe:
    description:
      - The recipe the image is built from on the source when no node has it (a directory holding a
        Dockerfile, or a Dockerfile); it comes before a pull. Empty builds nothing.
    type: str
    default: ""
  compression:
    description:
      - C(auto) is zstd when the source has it and every target's Docker (23.0 or later) reads it, else gzip.
      - C(none) streams the raw tar, for a link faster than the source's compressor.
    type: str
    default: auto
    choices: [auto, zstd, gzip, none]
  group:
    description: The inventory group, for messages.
    type: str
    default: gb10_cluster
  fail_on_problems:
    description: Fail when the plan has problems (else return them).
    type: bool
    default: true
extends_documentation_fragment:
  - gb10.serving.attributes
  - gb10.serving.attributes.read_only
'''

EXAMPLES = r'''
- name: Plan the copy of the serving image
  gb10.serving.serving_image_plan:
    image: vllm-node:latest
    nodes:
      - {host: spark1, id: "sha256:0123...", cluster_ip: 10.0.0.1, gate_load: true, client: true, zstd: true, docker_version: "28.3.1"}
      - {host: spark2, id: "", cluster_ip: 10.0.0.2, gate_load: true, client: true, zstd: true, docker_version: "28.3.1"}
  register: plan
'''

RETURN = r'''
source:
  description: The node the image is copied from (and pulled on, when O(pull) applies).
  returned: success
  type: str
  sample: spark1
source_id:
  description: The source's image ID; empty when it is pulled first.
  returned: success
  type: str
pull:
  description: Whether the image is pulled on the source first (no node has it).
  returned: success
  type: bool
build:
  description: Whether the image is built on the source first from O(build_recipe) (no node has it).
  returned: success
  type: bool
targets:
  description: Hosts that get a copy from the source.
  returned: success
  type: list
  elements: str
  sample: [spark2]
targets_ip:
  description: Where the source reaches each target over the link, by host (its C(link_ips) entry, else the target's C(cluster_ip)).
  returned: success
  type: dict
targets_layers:
  description:
    - How many of the source image's first layers each target holds already (by layer chain ID), by host;
      the copy leaves their files out. 0 when the image is pulled or built first.
  returned: success
  type: dict
  sample: {spark2: 6}
compression:
  description: C(zstd), C(gzip) or C(none) for the stream; empty when nothing is copied.
  returned: success
  type: str
actions:
  description: Per host, C(had), C(pull) or C(copy).
  returned: success
  type: dict
  sample: {spark1: had, spark2: copy}
would_change:
  description: Whether the role will pull or copy (the module itself changes nothing).
  returned: always
  type: bool
image:
  description: The image reference planned for.
  returned: always
  type: str
problems:
  description: Refusals, each naming host, variable and fix; empty when the plan may run.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils.serving_image import plan


def main():
    module = AnsibleModule(
        argument_spec=dict(
            image=dict(type='str', required=True),
            nodes=dict(type='list', elements='dict', required=True),
            source=dict(type='str', default=''),
            pull=dict(type='str', default='auto', choices=['auto', 'always', 'never']),
            build_recipe=dict(type='str', default=''),
            compression=dict(type='str', default='auto', choices=['auto', 'zstd', 'gzip', 'none']),
            group=dict(type='str', default='gb10_cluster'),
            fail_on_problems=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    result = plan(p['image'], p['nodes'], source=p['source'], pull=p['pull'],
                  build_recipe=p['build_recipe'], group=p['group'], compression=p['compression'])
    # "changed" of the plan is what the role will do; the module itself changes nothing.
    out = dict((k, v) for k, v in result.items() if k != 'changed')
    out['would_change'] = result['changed']
    if out['problems'] and p['fail_on_problems']:
        out['msg'] = 'serving image refused before anything changed: %s' % ' | '.join(out['problems'])
        module.fail_json(**out)
    out['changed'] = False
    module.exit_json(**out)


if __name__ == '__main__':
    main()
