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
    host. A check that ignores its failure (so that the host's other checks still run) is drift all
    the same when its name carries a rule; an ignored failure without a rule is not. The rule is
    the ID the task name ends with, for example C(Driver packages are held (H1)). A role's drift
    check (its C(tasks_from=drift) entry point, C(roles/<role>/tasks/drift*.yml)) is named
    without the role, as it was named when C(playbooks/drift.yml) held it.
  - Each check of a host counts once per rule; the changed variables of the NCCL/Gloo env file
    come to the rule each belongs to (filter C(gb10.serving.nccl_env_drift)). A role step run in
    check mode without a rule in its name is no finding by itself (the check after it reports it).
  - Writes C(drift-report.json) and C(drift-report.xml) (JUnit, one test case per host and rule)
    to O(output_dir), and prints a short summary with the command that fixes each finding.
  - A fix command is the one that runs when pasted from where the drift run was started. It repeats
    the drift run's inventory, extra vars (the profile among them) and connection and vault options,
    never its C(--check) or C(--diff); secrets given as extra vars (C(gb10_api_key), C(gb10_hf_token),
    anything named like a password or token) are left out and named as such. H1 and N1-N6 are fixed
    by the host-prep playbook with C(--limit) on the drifted host (it restarts no container and no
    engine), H4 by the recover playbook, everything else by the deploy playbook on every host (its
    preflight refuses C(--limit), since every host holds a rank).
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
    description:
      - Playbook named in the fix command for drift that a deploy converges back.
      - Empty means C(deploy.yml) next to the drift playbook that runs (C(gb10.serving.deploy) when
        that one was named by FQCN). A playbook that sets C(gb10_profile) itself (C(deploy-m27.yml))
        is fine, since the fix repeats the drift run's extra vars and C(-e) wins.
    default: ''
    type: str
    env:
      - name: GB10_DRIFT_DEPLOY_PLAYBOOK
    ini:
      - section: gb10_drift_report
        key: deploy_playbook
  host_prep_playbook:
    description:
      - Playbook named, with C(--limit) on the drifted host, in the fix command for H1 and N1-N6.
      - Empty means C(host-prep.yml) next to the drift playbook (C(gb10.serving.host_prep) by FQCN).
    default: ''
    type: str
    env:
      - name: GB10_DRIFT_HOST_PREP_PLAYBOOK
    ini:
      - section: gb10_drift_report
        key: host_prep_playbook
  recover_playbook:
    description:
      - Playbook named in the fix command for leaked memory (rule H4).
      - Empty means C(recover.yml) next to the drift playbook (C(gb10.serving.recover) by FQCN).
    default: ''
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
from ansible_collections.gb10.serving.plugins.plugin_utils.drift import DriftReport, check_name, rule_of


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
        args = dict(context.CLIARGS or {})
        self._check_mode = bool(args.get('check'))
        self._report = DriftReport(
            cliargs=args,
            deploy_playbook=self.get_option('deploy_playbook'),
            host_prep_playbook=self.get_option('host_prep_playbook'),
            recover_playbook=self.get_option('recover_playbook'),
        )

    def v2_playbook_on_play_start(self, play):
        play_vars = play.vars if isinstance(play.vars, dict) else {}
        self._active = str(play_vars.get('gb10_drift_report', '')).lower() in ('true', '1', 'yes')

    def _host_task(self, result):
        # A role's drift check (tasks_from: drift) is named as it was in drift.yml, without the role.
        task = result._task
        return result._host.get_name(), check_name(task.get_name(), task.name, task.get_path())

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
        # A drift check ignores its own failure so that the host's other checks still run: with a
        # rule in its name it is a finding all the same. An ignored failure without one is a
        # role's expected failure, no drift.
        if not (self._active and self._report):
            return
        host, task = self._host_task(result)
        if not ignore_errors or rule_of(task) != 'general':
            self._report.failed(host, task, result=result._result)

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
