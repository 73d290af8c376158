from xml.etree import ElementTree

from ansible_collections.gb10.serving.plugins.plugin_utils.drift import DriftReport, rule_of


def test_rule_comes_from_the_end_of_the_task_name():
    assert rule_of('Driver packages are held (H1)') == 'H1'
    assert rule_of('NCCL env file matches the profile (N1, N3)') == 'N1'
    assert rule_of('Gathering Facts') == 'general'
    assert rule_of('Mentions (H1) in the middle only') == 'general'


def report():
    r = DriftReport(inventory='inventory/sparks.ini', deploy_playbook='playbooks/deploy-m27.yml')
    r.ok('spark1', 'Driver packages are held (H1)')
    r.ok('spark2', 'Driver packages are held (H1)')
    r.ok('spark1', 'No modprobe override file (H2)')
    r.failed('spark2', 'No modprobe override file (H2)',
             {'msg': '/etc/modprobe.d/zz-nvidia-drm-override.conf is back'})
    r.changed('spark2', 'NCCL env file matches the profile (N1)',
              {'changed': True, 'diff': [{'after_header': '/etc/gb10/nccl.env'}]})
    r.failed('spark1', 'No leaked unified memory (H4)', {'msg': '41.2 GiB unaccounted'})
    return r


def test_findings_name_host_rule_and_fix():
    data = report().as_dict()
    assert data['drifted'] is True
    assert data['drifted_hosts'] == ['spark1', 'spark2']
    by_rule = {(f['host'], f['rule']): f for f in data['findings']}
    assert by_rule[('spark2', 'H2')]['summary'].endswith('is back')
    assert by_rule[('spark2', 'N1')]['summary'] == 'would change /etc/gb10/nccl.env'
    assert by_rule[('spark2', 'H2')]['fix'] == \
        'ansible-playbook playbooks/deploy-m27.yml -i inventory/sparks.ini --limit spark2'
    assert by_rule[('spark1', 'H4')]['fix'].startswith('ansible-playbook playbooks/recover.yml')


def test_junit_has_one_case_per_host_and_rule():
    suite = ElementTree.fromstring(report().junit_xml())
    cases = {(c.get('classname'), c.get('name')): c for c in suite.iter('testcase')}
    assert set(cases) == {('spark1', 'H1'), ('spark1', 'H2'), ('spark1', 'H4'),
                          ('spark2', 'H1'), ('spark2', 'H2'), ('spark2', 'N1')}
    assert cases[('spark1', 'H1')].find('failure') is None
    assert cases[('spark2', 'H2')].find('failure') is not None
    assert suite.get('tests') == '6' and suite.get('failures') == '3'


def test_clean_run_says_so():
    r = DriftReport()
    r.ok('spark1', 'Driver packages are held (H1)')
    assert r.as_dict()['drifted'] is False
    assert r.summary_lines() == ['DRIFT: none; 1 host(s) match the desired state']
