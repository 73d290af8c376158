# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic of the drift report (rule O3): which task results are drift, under which rule,
how to fix them, and the JSON / JUnit / text renderings. The callback plugin only feeds it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from xml.etree import ElementTree

# Drift checks name their rule at the end of the task name: "Driver packages are held (H1)".
RULE_IN_NAME = re.compile(r'\(([HNRVSMO][0-9]+)(?:[ ,/;][^)]*)?\)\s*$')

# H4 (leaked memory) is fixed by the recover playbook; everything else by deploying again,
# which converges the host back to the profile.
RECOVER_RULES = ('H4',)


def rule_of(task_name):
    """The rule ID a task name ends with, or 'general' for a task without one."""
    match = RULE_IN_NAME.search(task_name or '')
    return match.group(1) if match else 'general'


def fix_command(rule, host, inventory, deploy_playbook, recover_playbook):
    playbook = recover_playbook if rule in RECOVER_RULES else deploy_playbook
    return 'ansible-playbook %s -i %s --limit %s' % (playbook, inventory or '<inventory>', host)


def _summary_of(result):
    """One line saying what drifted, from a task result dict."""
    if result.get('msg'):
        return str(result['msg']).strip().splitlines()[0]
    diff = result.get('diff')
    diffs = diff if isinstance(diff, list) else [diff] if diff else []
    for entry in diffs:
        if isinstance(entry, dict):
            where = entry.get('after_header') or entry.get('before_header')
            if where:
                return 'would change %s' % where
    return 'would change'


class DriftReport(object):
    """Collects task outcomes per host; `findings` are the drift entries."""

    def __init__(self, inventory=None, deploy_playbook='playbooks/deploy.yml',
                 recover_playbook='playbooks/recover.yml'):
        self.inventory = inventory
        self.deploy_playbook = deploy_playbook
        self.recover_playbook = recover_playbook
        self.checked = {}  # host -> set of rules that had at least one check
        self.findings = []

    def _add(self, host, task_name, kind, summary):
        rule = rule_of(task_name)
        self.checked.setdefault(host, set()).add(rule)
        self.findings.append({
            'host': host,
            'rule': rule,
            'task': task_name,
            'kind': kind,
            'summary': summary,
            'fix': fix_command(rule, host, self.inventory, self.deploy_playbook,
                               self.recover_playbook),
        })

    def ok(self, host, task_name):
        self.checked.setdefault(host, set()).add(rule_of(task_name))

    def changed(self, host, task_name, result):
        """A change in check mode is a host that left the desired state."""
        self._add(host, task_name, 'would_change', _summary_of(result))

    def failed(self, host, task_name, result):
        self._add(host, task_name, 'failed', _summary_of(result) or 'failed')

    def unreachable(self, host, task_name, result):
        self._add(host, task_name, 'unreachable', _summary_of(result) or 'unreachable')

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
                        '%s: %s\nfix: %s' % (f['task'], f['summary'], f['fix']) for f in found)
        suite.set('tests', str(cases))
        suite.set('failures', str(failures))
        return ElementTree.tostring(suite, encoding='unicode')

    def summary_lines(self):
        if not self.findings:
            return ['DRIFT: none; %d host(s) match the desired state' % len(self.checked)]
        lines = ['DRIFT: %d finding(s) on %s' % (len(self.findings), ', '.join(self.drifted_hosts))]
        for f in self.findings:
            lines.append('  %s [%s] %s -- fix: %s' % (f['host'], f['rule'], f['summary'], f['fix']))
        return lines
