# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: cluster_head
short_description: The head of a cluster group, the host its Ray head and engine run on
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Returns the first host of the inventory group given as the term, as the inventory lists it
    (not as C(--limit) leaves it), which is the cluster's head (rank 0, the Ray head, the engine
    and its API, the source of the model and of the serving image, the master of the link check).
  - The one definition of the head - every role and playbook asks this lookup instead
    of indexing the group itself.
options:
  _terms:
    description: The inventory group (one name), e.g. C(gb10_cluster).
    required: true
  default:
    description:
      - Returned when the group is not in the inventory or has no host (a role run alone on a host
        outside the group). Without it such a group is an error naming the group and the fix.
    type: str
'''

EXAMPLES = r'''
- name: Only on the head
  ansible.builtin.debug:
    msg: this host runs the engine
  when: inventory_hostname == lookup('gb10.serving.cluster_head', 'gb10_cluster')

- name: The head's cluster address
  ansible.builtin.debug:
    msg: "{{ hostvars[lookup('gb10.serving.cluster_head', 'gb10_cluster')].gb10_cluster_ip }}"
'''

RETURN = r'''
_raw:
  description: One inventory host name.
  type: list
  elements: str
'''

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase


def cluster_head(groups, group, default=None):
    """The first host of group in the inventory's groups, else default; None for neither."""
    hosts = (groups or {}).get(group) or []
    if hosts:
        return hosts[0]
    return default


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1:
            raise AnsibleError("lookup('gb10.serving.cluster_head', <group>) takes one group name, got %r" % (terms,))
        group = str(terms[0])
        head = cluster_head((variables or {}).get('groups'), group, self.get_option('default'))
        if head is None:
            raise AnsibleError(
                "inventory group %s has no hosts, so it has no head: list the cluster's hosts in [%s], the head "
                "first (its Ray head, engine and API run there)" % (group, group))
        return [head]
