"""Runs a real ansible-playbook in check mode with the callback enabled and reads its reports."""
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
    - name: Driver packages are held (H1)
      ansible.builtin.assert:
        that: true
    - name: NCCL env file matches the profile (N1)
      ansible.builtin.copy:
        dest: "{{ env_file }}"
        content: "NCCL_IB_DISABLE=0\\n"
        mode: "0644"
    - name: A role step in check mode, without a rule (the check after it reports it)
      ansible.builtin.copy:
        dest: "{{ env_file }}.step"
        content: "x\\n"
        mode: "0644"
    - name: No modprobe override file (H2)
      ansible.builtin.assert:
        that: false
        fail_msg: override file is back
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
    assert proc.returncode != 0  # the failed H2 check fails the run
    assert not (tmp_path / 'nccl.env').exists()  # check mode changed nothing
    data = json.loads((tmp_path / 'report' / 'drift-report.json').read_text())
    found = {(f['host'], f['rule'], f['kind']) for f in data['findings']}
    assert found == {('spark1', 'N1', 'would_change'), ('spark1', 'H2', 'failed')}
    assert 'DRIFT: 2 finding(s) on spark1' in proc.stdout
    fixes = {f['rule']: f['fix'] for f in data['findings']}
    # The drift run's inventory, extra vars and connection, never its --check; --limit only for
    # the host-prep fix (N1), the configured deploy playbook on every host for H2.
    common = '-i spark1, -e ansible_python_interpreter=%s -e env_file=%s -c local' % (
        sys.executable, tmp_path / 'nccl.env')
    assert fixes['N1'] == 'ansible-playbook %s %s --limit spark1' % (tmp_path / 'host-prep.yml', common)
    assert fixes['H2'].startswith('ansible-playbook playbooks/deploy-m27.yml -i spark1, ')
    assert '--check' not in fixes['H2'] and '--limit' not in fixes['H2']
    assert fixes['N1'] in proc.stdout and fixes['H2'] in proc.stdout
    suite = ElementTree.parse(str(tmp_path / 'report' / 'drift-report.xml')).getroot()
    assert suite.get('tests') == '3' and suite.get('failures') == '2'


def test_plays_without_the_marker_write_no_report(tmp_path):
    proc = run(tmp_path, check=True,
               playbook=PLAYBOOK.replace('gb10_drift_report: true', 'gb10_drift_report: false'))
    assert proc.returncode != 0
    assert not (tmp_path / 'report').exists()
    assert 'DRIFT' not in proc.stdout


def test_a_check_that_ignores_its_failure_is_drift_and_the_later_checks_still_run(tmp_path):
    # drift.yml's checks ignore their own failure so that one finding hides no other on the host;
    # a role's ignored failure without a rule in its name is no finding.
    playbook = """
- name: Drift checks
  hosts: all
  gather_facts: false
  vars:
    gb10_drift_report: true
  tasks:
    - name: A role step that is expected to fail sometimes
      ansible.builtin.command: /bin/false
      changed_when: false
      check_mode: false
      register: step
      ignore_errors: true
    - name: NCCL environment file - Socket names (N3)
      ansible.builtin.assert:
        that: false
        fail_msg: GLOO_SOCKET_IFNAME=lo
      register: drift_found_n3
      ignore_errors: true
    - name: Ray container present (R2)
      ansible.builtin.assert:
        that: true
"""
    proc = run(tmp_path, check=True, playbook=playbook)
    assert proc.returncode == 0  # nothing fatal here: drift.yml's verdict play fails the run
    data = json.loads((tmp_path / 'report' / 'drift-report.json').read_text())
    assert [(f['host'], f['rule'], f['kind']) for f in data['findings']] == [('spark1', 'N3', 'failed')]
    cases = {(c.get('classname'), c.get('name'), c.find('failure') is not None)
             for c in ElementTree.parse(str(tmp_path / 'report' / 'drift-report.xml')).getroot().iter('testcase')}
    assert cases == {('spark1', 'N3', True), ('spark1', 'R2', False)}
