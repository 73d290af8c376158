import shlex
from xml.etree import ElementTree

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.filter.nccl_env_drift import nccl_env_drift
from ansible_collections.gb10.serving.plugins.filter.nccl_env_wanted import nccl_env_wanted
from ansible_collections.gb10.serving.plugins.plugin_utils.drift import (
    FINDINGS_FACT, RESULT_FIELD, DriftReport, check_name, drift_outcome, env_drift, fix_command, fix_kind)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H10", "O3")

CLIARGS = {'args': ('playbooks/drift.yml',), 'inventory': ('/repo/inventory/sparks.ini',),
           'extra_vars': ('gb10_profile=minimax-m27-nvfp4',), 'check': True, 'diff': True,
           'subset': None, 'tags': ('all',), 'skip_tags': ()}

SOCKET_ENV = """# Managed by gb10.serving.nccl_env; transport=socket on spark2.
GLOO_SOCKET_IFNAME=eth0
MASTER_ADDR=10.0.0.1
NCCL_IB_DISABLE=1
NCCL_NET=Socket
NCCL_NET_GDR_LEVEL=0
NCCL_NET_PLUGIN=none
NCCL_P2P_DISABLE=1
NCCL_SOCKET_IFNAME=eth0
VLLM_HOST_IP=10.0.0.2
"""


def held(rule):
    return {'rule': rule, 'drifted': False, 'finding': ''}


def drifted(rule, finding):
    return {'rule': rule, 'drifted': True, 'finding': finding}


def test_a_false_condition_is_drift_answered_as_changed_never_failed():
    # gb10.serving.drift_check: the rule is the check's argument, not its name; the host's other
    # checks still run (not failed), and the finding joins this run's findings on the host.
    asserted = {'failed': True, 'msg': 'spark2: earlyoom is not running', 'assertion': 'rc == 0', 'evaluated_to': False}
    earlier = [{'rule': 'H1', 'finding': 'spark2: 590 runs', 'check': 'Driver runs the pinned branch'}]
    out = drift_outcome(asserted, 'H10', 'Earlyoom runs with the role settings', earlier)
    assert 'failed' not in out and out['changed'] is True
    assert out[RESULT_FIELD] == {'rule': 'H10', 'drifted': True, 'finding': 'spark2: earlyoom is not running',
                                 'check': 'Earlyoom runs with the role settings'}
    assert [f['rule'] for f in out['ansible_facts'][FINDINGS_FACT]] == ['H1', 'H10']
    held_out = drift_outcome({'changed': False, 'msg': 'All assertions passed'}, 'H10', 'Earlyoom', earlier)
    assert held_out['changed'] is False and held_out[RESULT_FIELD]['drifted'] is False
    assert 'ansible_facts' not in held_out


def test_a_roles_drift_check_is_named_as_drift_yml_named_it():
    # The checks moved from playbooks/drift.yml into the roles' drift entry points; a
    # finding names them as before, without the role Ansible puts first. Any other task of a role
    # (a role step run in check mode) keeps the role in its name.
    root = '/home/u/.ansible/collections/ansible_collections/gb10/serving/roles/'
    assert check_name('gb10.serving.nccl_env : NCCL environment file - Socket transport as chosen (N4)',
                      'NCCL environment file - Socket transport as chosen (N4)',
                      root + 'nccl_env/tasks/drift_rule.yml:5') == 'NCCL environment file - Socket transport as chosen (N4)'
    assert check_name('gb10.serving.nvidia_driver : Driver packages are held (H1)', 'Driver packages are held (H1)',
                      root + 'nvidia_driver/tasks/drift.yml:38') == 'Driver packages are held (H1)'
    assert check_name('gb10.serving.nccl_env : Refuse a missing or loopback cluster interface (N3)',
                      'Refuse a missing or loopback cluster interface (N3)',
                      root + 'nccl_env/tasks/main.yml:6') == 'gb10.serving.nccl_env : Refuse a missing or loopback cluster interface (N3)'
    assert check_name('Refuse to run outside check mode', 'Refuse to run outside check mode',
                      '/repo/playbooks/drift.yml:20') == 'Refuse to run outside check mode'
    assert check_name('gb10.serving.x : Validating arguments', 'Validating arguments', '') == 'gb10.serving.x : Validating arguments'


def report(cliargs=None):
    r = DriftReport(cliargs=cliargs or CLIARGS)
    r.answered('spark1', 'Driver packages are held', held('H1'))
    r.answered('spark2', 'Driver packages are held', held('H1'))
    r.answered('spark1', 'No modprobe override file', held('H2'))
    r.answered('spark2', 'No modprobe override file',
               drifted('H2', '/etc/modprobe.d/zz-nvidia-drm-override.conf is back'))
    r.answered('spark2', 'NCCL environment file - RoCE devices', drifted('N1', '/etc/gb10/nccl.env: NCCL_DEBUG=INFO is set'))
    r.answered('spark1', 'No leaked unified memory', drifted('H4', '41.2 GiB unaccounted'))
    return r


def test_findings_name_host_rule_and_a_fix_that_runs():
    data = report().as_dict()
    assert data['drifted'] is True
    assert data['drifted_hosts'] == ['spark1', 'spark2']
    by_rule = {(f['host'], f['rule']): f for f in data['findings']}
    assert by_rule[('spark2', 'H2')]['summary'].endswith('is back')
    assert by_rule[('spark2', 'N1')]['summary'] == '/etc/gb10/nccl.env: NCCL_DEBUG=INFO is set'
    # H2 reboots the node: the whole cluster's deploy, with the profile, no --limit, no --check,
    # every step (not skipped where the node still matches its converged stamp).
    assert by_rule[('spark2', 'H2')]['fix'] == (
        'ansible-playbook playbooks/deploy.yml -i /repo/inventory/sparks.ini -e gb10_profile=minimax-m27-nvfp4 '
        '-e gb10_converge=full')
    # The env file is host prep only: that node alone.
    assert by_rule[('spark2', 'N1')]['fix'] == (
        'ansible-playbook playbooks/steps/04_host_prep.yml -i /repo/inventory/sparks.ini '
        '-e gb10_profile=minimax-m27-nvfp4 --limit spark2')
    assert by_rule[('spark1', 'H4')]['fix'] == \
        'ansible-playbook playbooks/recover.yml -i /repo/inventory/sparks.ini -e gb10_profile=minimax-m27-nvfp4'


def test_fix_kinds():
    # A4: reloading the node's packet filter restarts nothing, so host prep on that node fixes it.
    assert [fix_kind(r) for r in ('H1', 'H10', 'N3', 'N6', 'A4', 'H2', 'H4', 'R2', 'M3', 'general')] == [
        'host_prep', 'host_prep', 'host_prep', 'host_prep', 'host_prep', 'deploy', 'recover', 'deploy', 'deploy',
        'deploy']


def test_configured_playbooks_and_secrets():
    args = dict(CLIARGS, extra_vars=('gb10_profile=minimax-m27-nvfp4', 'gb10_api_key=k'))
    fix, left_out = fix_command('R1', 'spark1', args, deploy_playbook='playbooks/deploy-m27.yml')
    assert fix == ('ansible-playbook playbooks/deploy-m27.yml -i /repo/inventory/sparks.ini '
                   '-e gb10_profile=minimax-m27-nvfp4 -e gb10_converge=full')
    assert left_out == ['gb10_api_key']
    r = DriftReport(cliargs=args)
    r.answered('spark1', 'Engine runs the profile', drifted('R1', 'not healthy'))
    assert r.as_dict()['findings'][0]['fix_left_out'] == ['gb10_api_key']
    assert any('-e gb10_api_key=...' in line for line in r.summary_lines())
    fix, unused = fix_command('N3', 'spark2', dict(CLIARGS, args=('gb10.serving.drift',)))
    assert shlex.split(fix)[1] == 'gb10.serving.steps.04_host_prep'


def test_junit_has_one_case_per_host_and_rule():
    suite = ElementTree.fromstring(report().junit_xml())
    cases = {(c.get('classname'), c.get('name')): c for c in suite.iter('testcase')}
    assert set(cases) == {('spark1', 'H1'), ('spark1', 'H2'), ('spark1', 'H4'),
                          ('spark2', 'H1'), ('spark2', 'H2'), ('spark2', 'N1')}
    assert cases[('spark1', 'H1')].find('failure') is None
    assert cases[('spark2', 'H2')].find('failure') is not None
    assert suite.get('tests') == '6' and suite.get('failures') == '3'


def test_one_finding_per_host_and_rule_and_a_failure_is_one_without_a_rule():
    r = DriftReport(cliargs=CLIARGS)
    r.answered('spark2', 'Socket names', drifted('N3', 'GLOO_SOCKET_IFNAME=lo'))
    r.answered('spark2', 'Socket names again', drifted('N3', 'NCCL_SOCKET_IFNAME=lo'))
    data = r.as_dict()
    assert [(f['host'], f['rule']) for f in data['findings']] == [('spark2', 'N3')]
    assert data['findings'][0]['summary'] == 'GLOO_SOCKET_IFNAME=lo; NCCL_SOCKET_IFNAME=lo'
    assert [c.get('name') for c in ElementTree.fromstring(r.junit_xml()).iter('testcase')] == ['N3']
    # A task that failed in a drift run is no check's answer: the host could not be checked there,
    # whatever the task is called; the deploy's own run names the cause.
    r.failed('spark1', 'gb10.serving.nccl_env : Refuse a missing or loopback cluster interface (N3)',
             {'msg': 'spark1: eth9 does not exist'})
    found = {(f['host'], f['rule']): f for f in r.as_dict()['findings']}
    assert found[('spark1', 'general')]['summary'] == 'spark1: eth9 does not exist'
    assert found[('spark1', 'general')]['fix'].startswith('ansible-playbook playbooks/deploy.yml ')


def test_each_changed_env_variable_goes_to_its_rule():
    edited = SOCKET_ENV.replace('GLOO_SOCKET_IFNAME=eth0', 'GLOO_SOCKET_IFNAME=lo')
    assert env_drift(edited, SOCKET_ENV) == {'N3': ['GLOO_SOCKET_IFNAME=lo, the deploy writes GLOO_SOCKET_IFNAME=eth0']}
    edited = (SOCKET_ENV.replace('NCCL_NET_GDR_LEVEL=0', 'NCCL_NET_GDR_LEVEL=2')
              .replace('NCCL_P2P_DISABLE=1\n', '').replace('NCCL_IB_DISABLE=1', 'NCCL_IB_DISABLE=0')
              + 'NCCL_DEBUG=INFO\n')
    found = env_drift(edited, SOCKET_ENV)
    assert sorted(found) == ['N1', 'N2', 'N4']
    assert found['N4'] == ['NCCL_IB_DISABLE=0, the deploy writes NCCL_IB_DISABLE=1',
                           'NCCL_P2P_DISABLE is missing, the deploy writes NCCL_P2P_DISABLE=1']
    assert found['N1'] == ['NCCL_DEBUG=INFO is set, the deploy does not write NCCL_DEBUG']
    ring = 'NCCL_IB_ADDR_RANGE=192.168.0.0/16\nNCCL_IB_DISABLE=0\n'
    assert sorted(env_drift(ring + 'NCCL_IB_GID_INDEX=3\n', ring)) == ['N6']
    assert env_drift(SOCKET_ENV, SOCKET_ENV) == {}
    assert env_drift('# other comment\n' + SOCKET_ENV, SOCKET_ENV) == {'N1': [
        'the file differs from what the deploy writes outside its variables (comments)']}


def test_the_filter_reads_the_template_result():
    edited = SOCKET_ENV.replace('VLLM_HOST_IP=10.0.0.2', 'VLLM_HOST_IP=127.0.0.1')
    result = {'changed': True, 'diff': [{'before': edited, 'after': SOCKET_ENV,
                                         'before_header': '/etc/gb10/nccl.env', 'after_header': '/tmp/x/nccl.env.j2'}]}
    assert nccl_env_drift(result) == {'N3': ['VLLM_HOST_IP=127.0.0.1, the deploy writes VLLM_HOST_IP=10.0.0.2']}
    assert nccl_env_drift({'changed': False}) == {}
    assert list(nccl_env_drift({'changed': True})) == ['N1']


def test_the_env_the_deploy_writes_comes_from_the_diff_not_the_host():
    # drift.yml compares the Ray containers with this (R2), so an edited file is no R2 finding.
    edited = SOCKET_ENV.replace('GLOO_SOCKET_IFNAME=eth0', 'GLOO_SOCKET_IFNAME=lo')
    wanted = nccl_env_wanted({'changed': True, 'diff': [{'before': edited, 'after': SOCKET_ENV}]})
    assert wanted['GLOO_SOCKET_IFNAME'] == 'eth0' and wanted['VLLM_HOST_IP'] == '10.0.0.2'
    assert len(wanted) == 9  # every variable, no comment line
    with pytest.raises(AnsibleFilterError, match='no diff'):
        nccl_env_wanted({'changed': True})


def test_clean_run_says_so():
    r = DriftReport()
    r.answered('spark1', 'Driver packages are held', held('H1'))
    assert r.as_dict()['drifted'] is False
    assert r.summary_lines() == ['DRIFT: none; 1 host(s) match the desired state']
