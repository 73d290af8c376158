# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic of the drift report (rule O3): which task results are drift, under which rule,
how to fix them, and the JSON / JUnit / text renderings. The callback plugin only feeds it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from xml.etree import ElementTree

from ansible_collections.gb10.serving.plugins.module_utils.roce import env_rule
from ansible_collections.gb10.serving.plugins.plugin_utils.cli_command import (
    left_out_note, playbook_command, sibling_playbook)

# The one drift contract (gb10.serving.drift_check): a check's answer is this result field, and a
# drifted check's finding is appended to this host fact, which drift.yml's verdict reads.
RESULT_FIELD = 'gb10_drift'
FINDINGS_FACT = 'gb10_drift_findings'

# How each rule's drift is fixed:
# - H4 (leaked memory): playbooks/recover.yml on the whole group (it reboots only leaked nodes).
# - H1, H10, N1-N6 and A4 are host prep only (driver pin and holds, earlyoom, the NCCL/Gloo env file, the
#   node's packet filter): the host-prep
#   playbook on the drifted node alone (--limit); it restarts no container and no engine (the
#   Ray containers were started with the env the file goes back to).
# - Everything else (H2 reboots the node, M3, R1-R5, a check without a rule) needs the cluster:
#   the deploy playbook on every node (its preflight refuses --limit, every host holds a rank); it
#   converges the drifted node and keeps a healthy engine whose launch is unchanged (O2). With
#   -e gb10_converge=full: every step runs even where the node still matches its converged stamp.
RECOVER_RULES = ('H4',)
HOST_PREP_RULES = ('H1', 'H10', 'N1', 'N2', 'N3', 'N4', 'N6', 'A4')

# A role's drift entry point (roles/<role>/tasks/drift.yml and the files it includes, drift_*.yml):
# the task's path as Ansible gives it, "<file>:<line>".
DRIFT_ENTRY_PATH = re.compile(r'[/\\]roles[/\\][^/\\]+[/\\]tasks[/\\]drift(?:_[^/\\]*)?\.ya?ml(?::\d+)?$')


def drift_outcome(assert_result, rule, check, findings):
    """gb10.serving.drift_check's result from ansible.builtin.assert's: a false condition is drift,
    reported as changed (the deploy would change the node), never failed, so the host's other
    checks still run; the finding goes to the result field and, appended to `findings` (this run's
    so far), to the host fact."""
    result = dict(assert_result)
    drifted = bool(result.pop('failed', False))
    finding = str(result.get('msg') or '').strip() if drifted else ''
    result['changed'] = drifted
    result[RESULT_FIELD] = {'rule': rule, 'drifted': drifted, 'finding': finding, 'check': check}
    if drifted:
        result['ansible_facts'] = {FINDINGS_FACT: list(findings or []) + [
            {'rule': rule, 'finding': finding, 'check': check}]}
    return result


def check_name(full_name, own_name, path):
    """The name a finding gives a task. A role's drift check (its drift entry point, rule O3) by its
    own name, as the check was named when playbooks/drift.yml held it; any other task as Ansible
    names it (a role's task with the role first, "gb10.serving.nccl_env : ...")."""
    if own_name and DRIFT_ENTRY_PATH.search(path or ''):
        return own_name
    return full_name


def fix_kind(rule):
    """'recover', 'host_prep' or 'deploy': which playbook fixes drift under this rule."""
    if rule in RECOVER_RULES:
        return 'recover'
    if rule in HOST_PREP_RULES:
        return 'host_prep'
    return 'deploy'


def fix_command(rule, host, cliargs=None, deploy_playbook='', host_prep_playbook='', recover_playbook=''):
    """(command line, secrets left out) that fixes drift under `rule` on `host`: the user's own
    inventory, extra vars (the profile among them) and connection options from the drift run's
    arguments, never its --check/--diff; --limit only for a host-prep fix."""
    cliargs = cliargs or {}
    drift_playbook = (cliargs.get('args') or ('playbooks/drift.yml',))[0]
    kind = fix_kind(rule)
    if kind == 'recover':
        playbook = recover_playbook or sibling_playbook(drift_playbook, 'recover')
        return playbook_command(cliargs, [playbook], limit=None)
    if kind == 'host_prep':
        playbook = host_prep_playbook or sibling_playbook(drift_playbook, 'steps/04_host_prep')
        return playbook_command(cliargs, [playbook], limit=host)
    playbook = deploy_playbook or sibling_playbook(drift_playbook, 'deploy')
    command, left_out = playbook_command(cliargs, [playbook], limit=None)
    # Every step: the deploy's converged check compares each node with its stamp, which
    # does not read everything drift does (a model file's checksum at the same size and time, M3).
    return command + ' -e gb10_converge=full', left_out


def parse_env(text):
    """{KEY: VALUE} of an env file's KEY=VALUE lines (comments and blank lines skipped)."""
    out = {}
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line.startswith('#') or '=' not in line:
            continue
        key, value = line.split('=', 1)
        out[key.strip()] = value
    return out


def template_diffs(result):
    """The diff entries (dicts with 'before'/'after') of a registered template result run with diff on."""
    diff = result.get('diff')
    return [d for d in (diff if isinstance(diff, list) else [diff]) if isinstance(d, dict) and 'after' in d]


def env_drift(before, after):
    """{rule: [one line per changed variable]} between the file on the host (before) and the one
    the deploy writes (after); empty when they agree. A difference outside the variables
    (comments) is N1's."""
    have, wanted = parse_env(before), parse_env(after)
    out = {}
    for key in sorted(set(have) | set(wanted)):
        if have.get(key) == wanted.get(key):
            continue
        if key not in have:
            line = '%s is missing, the deploy writes %s=%s' % (key, key, wanted[key])
        elif key not in wanted:
            line = '%s=%s is set, the deploy does not write %s' % (key, have[key], key)
        else:
            line = '%s=%s, the deploy writes %s=%s' % (key, have[key], key, wanted[key])
        out.setdefault(env_rule(key, wanted), []).append(line)
    if not out and (before or '') != (after or ''):
        out['N1'] = ['the file differs from what the deploy writes outside its variables (comments)']
    return out


def _first_line(text, default):
    """The first line of a finding or a failed task's message, or default where there is none."""
    lines = str(text or '').strip().splitlines()
    return lines[0] if lines else default


class DriftReport(object):
    """Collects task outcomes per host; `findings` are the drift entries, one per host and rule."""

    def __init__(self, cliargs=None, deploy_playbook='', host_prep_playbook='', recover_playbook=''):
        self.cliargs = dict(cliargs or {})
        self.deploy_playbook = deploy_playbook
        self.host_prep_playbook = host_prep_playbook
        self.recover_playbook = recover_playbook
        self.checked = {}  # host -> set of rules that had at least one check
        self.findings = []

    def _check(self, host, rule):
        self.checked.setdefault(host, set()).add(rule)

    def _add(self, host, task_name, rule, kind, summary):
        self._check(host, rule)
        for finding in self.findings:
            if finding['host'] == host and finding['rule'] == rule:
                # One finding per host and rule: a second check of the same rule adds its words.
                if summary not in finding['summary']:
                    finding['summary'] += '; ' + summary
                if task_name not in finding['task']:
                    finding['task'] += '; ' + task_name
                return
        fix, left_out = fix_command(rule, host, self.cliargs, self.deploy_playbook,
                                    self.host_prep_playbook, self.recover_playbook)
        self.findings.append({
            'host': host,
            'rule': rule,
            'task': task_name,
            'kind': kind,
            'summary': summary,
            'fix': fix,
            'fix_left_out': left_out,
        })

    def answered(self, host, task_name, answer):
        """A drift check's answer (its result's gb10_drift field): checked, and a finding when drifted."""
        rule = answer.get('rule') or 'general'
        if answer.get('drifted'):
            self._add(host, task_name, rule, 'drifted', _first_line(answer.get('finding'), 'drifted'))
        else:
            self._check(host, rule)

    def failed(self, host, task_name, result):
        """A task that failed in a drift run (not a check's answer: a check answers, it does not
        fail): the host could not be checked there, which the deploy's run shows."""
        self._add(host, task_name, 'general', 'failed', _first_line(result.get('msg'), 'failed'))

    def unreachable(self, host, task_name, result):
        self._add(host, task_name, 'general', 'unreachable', _first_line(result.get('msg'), 'unreachable'))

    @property
    def drifted_hosts(self):
        return sorted(set(f['host'] for f in self.findings))

    def as_dict(self):
        hosts = sorted(self.checked)
        return {
            'drifted': bool(self.findings),
            'hosts': hosts,
            'drifted_hosts': self.drifted_hosts,
            'findings': self.findings,
        }

    def junit_xml(self):
        """One test case per host and rule: failed when that rule drifted on that host."""
        suite = ElementTree.Element('testsuite', name='gb10.serving drift')
        cases = failures = 0
        for host in sorted(self.checked):
            for rule in sorted(self.checked[host]):
                cases += 1
                case = ElementTree.SubElement(suite, 'testcase', classname=host, name=rule)
                found = [f for f in self.findings if f['host'] == host and f['rule'] == rule]
                if found:
                    failures += 1
                    failure = ElementTree.SubElement(
                        case, 'failure', message='; '.join(f['summary'] for f in found))
                    failure.text = '\n'.join(
                        '%s: %s\nfix: %s%s' % (f['task'], f['summary'], f['fix'],
                                               ('\n' + left_out_note(f['fix_left_out'])) if f['fix_left_out'] else '')
                        for f in found)
        suite.set('tests', str(cases))
        suite.set('failures', str(failures))
        return ElementTree.tostring(suite, encoding='unicode')

    def summary_lines(self):
        if not self.findings:
            return ['DRIFT: none; %d host(s) match the desired state' % len(self.checked)]
        lines = ['DRIFT: %d finding(s) on %s' % (len(self.findings), ', '.join(self.drifted_hosts))]
        for f in self.findings:
            lines.append('  %s [%s] %s -- fix: %s' % (f['host'], f['rule'], f['summary'], f['fix']))
            if f['fix_left_out']:
                lines.append('    (%s)' % left_out_note(f['fix_left_out']))
        return lines
