# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: drift_check
short_description: One drift check of a GB10 node under its rule, read by the drift report and verdict (rule O3)
version_added: "0.1.0"
description:
  - The one drift contract of the collection. Every role's drift entry point (C(tasks_from=drift)) ends each
    of its checks with this action; nothing else reports drift.
  - The conditions are those of M(ansible.builtin.assert) (O(that), O(fail_msg), O(quiet)), evaluated by the
    same action as there. When one is false the node has drifted from what the deploy leaves - the deploy would
    change it - so the result is C(changed), never C(failed), and the host's other checks still run.
  - The result carries C(gb10_drift) (rule, drifted, finding), which the C(gb10.serving.drift_report) callback
    reads whatever the task is called, and a drifted check appends its finding to the host fact
    C(gb10_drift_findings), which C(playbooks/drift.yml)'s verdict reads.
  - O(reset) starts a run's findings afresh (a fact cache keeps facts across runs); C(playbooks/drift.yml)
    does it first.
options:
  rule:
    description: The rule the check enforces, as C(docs/rules.md) names it (C(H1), C(N5), ...). Required unless O(reset).
    type: str
  that:
    description: The conditions, as M(ansible.builtin.assert) takes them; all true - no drift. Required unless O(reset).
    type: list
    elements: str
  fail_msg:
    description: The finding when a condition is false - the host, what differs, and why it matters.
    type: str
    aliases: [msg]
  success_msg:
    description: The message when every condition holds.
    type: str
  quiet:
    description: As M(ansible.builtin.assert) - less output when every condition holds.
    type: bool
    default: false
  reset:
    description: Forget this host's findings of an earlier run; nothing else is checked.
    type: bool
    default: false
notes:
  - Not in a loop - one check per task, so each finding has its own result.
attributes:
  check_mode:
    support: full
    description: It only evaluates conditions; drift checks run in check mode.
  diff_mode:
    support: none
    description: Nothing is changed.
  action:
    support: full
    description: Runs on the controller, as M(ansible.builtin.assert) does.
extends_documentation_fragment:
  - gb10.serving.attributes
'''

EXAMPLES = r'''
- name: Earlyoom runs with the role's settings (H10)
  gb10.serving.drift_check:
    rule: H10
    that:
      - oom_guard_drift_process.rc == 0
      - oom_guard_drift_settings is not changed
    fail_msg: "{{ inventory_hostname }}: earlyoom is not running as the deploy left it"
    quiet: true
  register: oom_guard_drift_guard
'''

RETURN = r'''
gb10_drift:
  description: The check's answer, read by the drift report.
  returned: always, except with reset
  type: dict
  contains:
    rule:
      description: The rule.
      type: str
      sample: H10
    drifted:
      description: Whether a condition was false.
      type: bool
      sample: true
    finding:
      description: The finding (fail_msg) when drifted, else empty.
      type: str
      sample: "spark2: earlyoom is not running"
    check:
      description: The task's name.
      type: str
      sample: Earlyoom runs with the role's settings (H10)
msg:
  description: The finding when drifted, else the success message.
  returned: always
  type: str
ansible_facts:
  description: C(gb10_drift_findings), the host's findings of this run (each with rule, finding, check).
  returned: when drifted, and with reset
  type: dict
'''
