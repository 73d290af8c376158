# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of gb10.serving.drift_check (documentation in plugins/modules/drift_check.py): the one
drift contract (rule O3). The conditions are ansible.builtin.assert's, evaluated by assert's own
action; the answer is a result field, `gb10_drift`, that the drift_report callback reads, and the
host's findings, that drift.yml's verdict reads."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib

from ansible.errors import AnsibleActionFail
from ansible_collections.gb10.serving.plugins.plugin_utils.drift import FINDINGS_FACT, drift_outcome

# assert's own action (a keyword as a module name: imported by its path): its conditions, its
# templating of them and its messages, whatever the ansible-core version.
AssertAction = importlib.import_module('ansible.plugins.action.assert').ActionModule


class ActionModule(AssertAction):

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        args = dict(self._task.args)
        rule = args.pop('rule', None)
        reset = args.pop('reset', False)
        if reset:
            # A fact cache keeps facts across runs: a drift run starts from no findings.
            return {'changed': False, 'msg': 'no drift findings yet in this run', 'ansible_facts': {FINDINGS_FACT: []}}
        if not rule:
            raise AnsibleActionFail('gb10.serving.drift_check needs rule: the ID of the rule the check enforces (docs/rules.md)')
        # assert validates its own arguments: it gets them without ours.
        self._task.args = args
        result = super(ActionModule, self).run(tmp, task_vars)
        if result.get('failed') and 'assertion' not in result:
            return result  # not a finding: the check itself could not run (bad arguments, a template error)
        return drift_outcome(result, rule, self._task.get_name(), task_vars.get(FINDINGS_FACT))
