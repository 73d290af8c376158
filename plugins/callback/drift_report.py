# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: drift_report
type: aggregate
short_description: Report which GB10 hosts left the desired state (rule O3), as JSON, JUnit and text
version_added: "0.1.0"
description:
  - Active only in plays that set C(gb10_drift_report=true) (as C(playbooks/drift.yml) does), so it
    can stay enabled for every run.
  - A task that fails, or that reports C(changed) while the run is in check mode, is drift on that
    host. The rule is the ID the task name ends with, for example C(Driver packages are held (H1)).
  - Writes C(drift-report.json) and C(drift-report.xml) (JUnit, one test case per host and rule)
    to O(output_dir), and prints a short summary with the command that fixes each finding.
author:
  - gb10.serving developers (@gb10-serving)
requirements:
  - Enable it with C(callbacks_enabled = gb10.serving.drift_report) in C(ansible.cfg) or
    C(ANSIBLE_CALLBACKS_ENABLED).
options:
  output_dir:
    description: Directory the JSON and JUnit reports are written to.
    default: drift-report
    type: path
    env:
      - name: GB10_DRIFT_REPORT_DIR
    ini:
      - section: gb10_drift_report
        key: output_dir
  deploy_playbook:
    description: Playbook named in the fix command for drift that a deploy converges back.
    default: playbooks/deploy.yml
    type: str
    env:
      - name: GB10_DRIFT_DEPLOY_PLAYBOOK
    ini:
      - section: gb10_drift_report
        key: deploy_playbook
  recover_playbook:
    description: Playbook named in the fix command for leaked memory (rule H4).
    default: playbooks/recover.yml
    type: str
    env:
      - name: GB10_DRIFT_RECOVER_PLAYBOOK
    ini:
      - section: gb10_drift_report
        key: recover_playbook
'''

import json
import os

from ansible import context
from ansible.plugins.callback import CallbackBase
from ansible_collections.gb10.serving.plugins.plugin_utils.drift import DriftReport


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'gb10.serving.drift_report'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._report = None
        self._active = False
        self._check_mode = False

    def v2_playbook_on_start(self, playbook):
        args = context.CLIARGS or {}
        inventory = args.get('inventory') or ()
        self._check_mode = bool(args.get('check'))
        self._report = DriftReport(
            inventory=','.join(inventory) if inventory else None,
            deploy_playbook=self.get_option('deploy_playbook'),
            recover_playbook=self.get_option('recover_playbook'),
        )

    def v2_playbook_on_play_start(self, play):
        play_vars = play.vars if isinstance(play.vars, dict) else {}
        self._active = str(play_vars.get('gb10_drift_report', '')).lower() in ('true', '1', 'yes')

    def _host_task(self, result):
        return result._host.get_name(), result._task.get_name()

    def v2_runner_on_ok(self, result):
        if not (self._active and self._report):
            return
        host, task = self._host_task(result)
        in_check = self._check_mode or bool(result._task.check_mode)
        if result._result.get('changed') and in_check:
            self._report.changed(host, task, result._result)
        else:
            self._report.ok(host, task)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if self._active and self._report and not ignore_errors:
            self._report.failed(*self._host_task(result), result=result._result)

    def v2_runner_on_unreachable(self, result):
        if self._active and self._report:
            self._report.unreachable(*self._host_task(result), result=result._result)

    def v2_playbook_on_stats(self, stats):
        if not self._report or not self._report.checked:
            return
        out = os.path.abspath(self.get_option('output_dir'))
        if not os.path.isdir(out):
            os.makedirs(out)
        with open(os.path.join(out, 'drift-report.json'), 'w') as handle:
            json.dump(self._report.as_dict(), handle, indent=2, sort_keys=True)
        with open(os.path.join(out, 'drift-report.xml'), 'w') as handle:
            handle.write(self._report.junit_xml())
        for line in self._report.summary_lines():
            self._display.display(line)
        self._display.display('drift report: %s/drift-report.{json,xml}' % out)
