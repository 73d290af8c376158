# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: oom_guard_threshold
short_description: The OOM guard's threshold for a node, from what its warm engine leaves available
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Rule H10. earlyoom sends SIGTERM at the threshold and SIGKILL at half of it. The threshold is
    half of what a warm serving node is expected to keep available (the fit's C(warm_available_gib)),
    at least 1 GiB, or the operator's own figure.
  - C(ok) is false when the threshold leaves less than the same again below the warm figure, where
    the guard would end a healthy engine.
options:
  _input:
    description: GiB a warm serving node is expected to keep available; none takes the floor (no profile known).
    type: float
    required: true
  explicit_gib:
    description: The operator's threshold in GiB; omitted derives it.
    type: float
'''

EXAMPLES = r'''
- name: The guard's threshold for this node
  ansible.builtin.debug:
    msg: "{{ (4.1 | gb10.serving.oom_guard_threshold).threshold_gib }}"
'''

RETURN = r'''
_value:
  description: The threshold.
  type: dict
  contains:
    threshold_gib:
      description: SIGTERM when available memory falls to this.
      type: float
    kill_gib:
      description: SIGKILL when it falls to this (half the threshold).
      type: float
    warm_available_gib:
      description: The input.
      type: float
    ok:
      description: Whether the threshold leaves the same again as margin below the warm figure.
      type: bool
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gb10.serving.plugins.module_utils.fit import FitError, oom_guard_threshold


def _oom_guard_threshold(warm_available_gib, explicit_gib=None):
    try:
        return oom_guard_threshold(None if warm_available_gib in (None, '') else float(warm_available_gib),
                                   explicit_gib=None if explicit_gib in (None, '') else float(explicit_gib))
    except (FitError, TypeError, ValueError) as exc:
        raise AnsibleFilterError('oom_guard_threshold: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'oom_guard_threshold': _oom_guard_threshold}
