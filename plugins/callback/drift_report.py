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
  - Reads the one drift contract, the C(gb10_drift) field of each result of M(gb10.serving.drift_check)
    (rule, drifted, finding), whatever the task is called. A drifted check is a finding on that host
    under its rule; a check that holds counts the rule as checked there. A role's drift check (its
    C(tasks_from=drift) entry point, C(roles/<role>/tasks/drift*.yml)) is named without the role.
  - A task that fails (not ignored, not in a block with a rescue, whose check then answers) or a host
    that is unreachable in such a play is a finding without a rule - the host could not be checked
    there. Nothing else is drift - a role step run in check mode that would change something is
    reported by the check after it.
  - Each check of a host counts once per rule; the changed variables of the NCCL/Gloo env file
    come to the rule each belongs to (filter C(gb10.serving.nccl_env_drift)).
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
      - Empty means C(steps/04_host_prep.yml) next to the drift playbook (C(gb10.serving.steps.04_host_prep) by FQCN).
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
from ansible_collections.gb10.serving.plugins.plugin_utils.drift import RESULT_FIELD, DriftReport, check_name


def rescued(task):
    """Whether a block around the task has a rescue, which then answers for its failure."""
    parent = getattr(task, '_parent', None)
    while parent is not None:
        if getattr(parent, 'rescue', None):
            return True
        parent = getattr(parent, '_parent', None)
    return False


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'gb10.serving.drift_report'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._report = None
        self._active = False

    def v2_playbook_on_start(self, playbook):
        args = dict(context.CLIARGS or {})
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
        answer = result._result.get(RESULT_FIELD)
        if isinstance(answer, dict):
            host, task = self._host_task(result)
            self._report.answered(host, task, answer)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        # A check answers, it does not fail: a failure is a host that could not be checked there.
        # An ignored one is a role's expected failure, no drift; a rescued one is answered by the
        # rescue's check (link_check's drift entry point).
        if not (self._active and self._report) or ignore_errors or rescued(result._task):
            return
        host, task = self._host_task(result)
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
