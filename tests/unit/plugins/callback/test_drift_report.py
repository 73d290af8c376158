"""Runs a real ansible-playbook in check mode with the callback enabled, its checks the real
gb10.serving.drift_check action, and reads its reports."""
import pytest
import json
import os
import subprocess
import sys
from xml.etree import ElementTree

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O3")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))

PLAYBOOK = """
- name: Drift checks
  hosts: all
  gather_facts: false
  vars:
    gb10_drift_report: true
  tasks:
    - name: Forget an earlier run's findings
      gb10.serving.drift_check:
        reset: true
    - name: Driver packages are held
      gb10.serving.drift_check:
        rule: H1
        that: true
    # A role step in check mode is no finding, whatever its name says: the check after it answers.
    - name: Render the env file (N1)
      ansible.builtin.copy:
        dest: "{{ env_file }}"
        content: "NCCL_IB_DISABLE=0\\n"
        mode: "0644"
      register: rendered
    - name: NCCL env file as deployed
      gb10.serving.drift_check:
        rule: N1
        that: rendered is not changed
        fail_msg: "{{ env_file }} differs from what the deploy writes"
    - name: No modprobe override file
      gb10.serving.drift_check:
        rule: H2
        that: false
        fail_msg: override file is back
    - name: A link measurement whose refusal is its finding
      block:
        - name: Refuse a slow link (N5)
          ansible.builtin.assert:
            that: false
            fail_msg: 9 Gb/s, the floor is 60
      rescue:
        - name: The link runs at its floor
          gb10.serving.drift_check:
            rule: N5
            that: false
            fail_msg: "{{ ansible_failed_result.msg }}"

- name: Verdict
  hosts: all
  gather_facts: false
  tasks:
    - name: Fail every host where a check found drift
      ansible.builtin.assert:
        that: gb10_drift_findings | length == 0
        fail_msg: "{{ gb10_drift_findings | map(attribute='rule') | join(',') }}"
"""


def run(tmp_path, check, playbook=PLAYBOOK):
    (tmp_path / 'drift.yml').write_text(playbook)
    env = dict(os.environ,
               ANSIBLE_CALLBACKS_ENABLED='gb10.serving.drift_report',
               ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections'),
               GB10_DRIFT_REPORT_DIR=str(tmp_path / 'report'),
               GB10_DRIFT_DEPLOY_PLAYBOOK='playbooks/deploy-m27.yml')
    cmd = [os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'),
           '-i', 'spark1,', '-c', 'local', '-e', 'ansible_python_interpreter=' + sys.executable,
           '-e', 'env_file=%s' % (tmp_path / 'nccl.env'), str(tmp_path / 'drift.yml')]
    if check:
        cmd.insert(1, '--check')
    proc = subprocess.run(cmd, env=env, cwd=str(tmp_path), capture_output=True, text=True, check=False)
    return proc


def test_check_run_reports_drift_per_rule(tmp_path):
    proc = run(tmp_path, check=True)
    assert proc.returncode != 0  # the verdict fails the drifted host
    assert 'H2,N1,N5' not in proc.stdout and 'N1,H2,N5' in proc.stdout  # the findings, in the order found
    assert not (tmp_path / 'nccl.env').exists()  # check mode changed nothing
    data = json.loads((tmp_path / 'report' / 'drift-report.json').read_text())
    found = {(f['host'], f['rule'], f['kind']) for f in data['findings']}
    # The rescued refusal is answered by its rescue's check alone; the verdict is no finding.
    assert found == {('spark1', 'N1', 'drifted'), ('spark1', 'H2', 'drifted'), ('spark1', 'N5', 'drifted')}
    by_rule = {f['rule']: f for f in data['findings']}
    assert by_rule['N5']['summary'] == '9 Gb/s, the floor is 60'
    assert 'DRIFT: 3 finding(s) on spark1' in proc.stdout
    fixes = {f['rule']: f['fix'] for f in data['findings']}
    # The drift run's inventory, extra vars and connection, never its --check; --limit only for
    # the host-prep fix (N1), the configured deploy playbook on every host for H2.
    common = '-i spark1, -e ansible_python_interpreter=%s -e env_file=%s -c local' % (
        sys.executable, tmp_path / 'nccl.env')
    assert fixes['N1'] == 'ansible-playbook %s %s --limit spark1' % (tmp_path / 'steps' / '04_host_prep.yml', common)
    assert fixes['H2'].startswith('ansible-playbook playbooks/deploy-m27.yml -i spark1, ')
    assert '--check' not in fixes['H2'] and '--limit' not in fixes['H2']
    assert fixes['N1'] in proc.stdout and fixes['H2'] in proc.stdout
    suite = ElementTree.parse(str(tmp_path / 'report' / 'drift-report.xml')).getroot()
    assert suite.get('tests') == '4' and suite.get('failures') == '3'


def test_plays_without_the_marker_write_no_report(tmp_path):
    proc = run(tmp_path, check=True,
               playbook=PLAYBOOK.replace('gb10_drift_report: true', 'gb10_drift_report: false'))
    assert proc.returncode != 0
    assert not (tmp_path / 'report').exists()
    assert 'DRIFT' not in proc.stdout


def test_a_failure_is_a_finding_without_a_rule_and_an_ignored_one_is_none(tmp_path):
    # A check answers, it does not fail; a task that fails in a drift play is a host that could not
    # be checked there (a finding without a rule, fixed by the deploy), whatever its name says. An
    # ignored failure is a role's expected one, no finding.
    playbook = """
- name: Drift checks
  hosts: all
  gather_facts: false
  vars:
    gb10_drift_report: true
  tasks:
    - name: A role step that is expected to fail sometimes (N3)
      ansible.builtin.command: /bin/false
      changed_when: false
      check_mode: false
      ignore_errors: true
    - name: Ray container present
      gb10.serving.drift_check:
        rule: R2
        that: true
    - name: A role refuses the host (N3)
      ansible.builtin.fail:
        msg: eth9 is not on this host
"""
    proc = run(tmp_path, check=True, playbook=playbook)
    assert proc.returncode != 0
    data = json.loads((tmp_path / 'report' / 'drift-report.json').read_text())
    assert [(f['host'], f['rule'], f['kind'], f['summary']) for f in data['findings']] == [
        ('spark1', 'general', 'failed', 'eth9 is not on this host')]
    cases = {(c.get('classname'), c.get('name'), c.find('failure') is not None)
             for c in ElementTree.parse(str(tmp_path / 'report' / 'drift-report.xml')).getroot().iter('testcase')}
    assert cases == {('spark1', 'general', True), ('spark1', 'R2', False)}


def test_a_check_needs_its_rule(tmp_path):
    playbook = """
- name: Drift checks
  hosts: all
  gather_facts: false
  tasks:
    - name: A check without a rule
      gb10.serving.drift_check:
        that: true
"""
    proc = run(tmp_path, check=True, playbook=playbook)
    assert proc.returncode != 0 and 'needs rule' in proc.stdout, proc.stdout
