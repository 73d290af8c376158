import pytest
from ansible_collections.gb10.serving.plugins.modules import roce_facts

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("N1", "N5")


def args(fixture_path, tree, cluster_ip, **extra):
    with open(fixture_path('sysfs', *(tree.split('/') + ['ip-addr.json']))) as handle:
        text = handle.read()
    out = {'sys_root': fixture_path('sysfs', *tree.split('/')), 'cluster_ip': cluster_ip,
           'ip_addr_json': text}
    out.update(extra)
    return out


def test_pair_returns_env_and_interfaces(run_module, fixture_path):
    failed, result = run_module(roce_facts.main, args(fixture_path, 'direct-pair/spark2',
                                                      '192.168.100.20'), check_mode=True)
    assert not failed, result
    assert result['changed'] is False
    assert result['env']['NCCL_IB_GID_INDEX'] == '3'
    assert result['interfaces']['enp1s0f1np1'] == {
        'mtu': 9000, 'speed_mbps': 200000, 'operstate': 'up', 'ipv4': ['192.168.100.20/24']}
    assert len(result['rdma']) == 4


def test_wrong_wire_fails_with_the_reason(run_module, fixture_path):
    failed, result = run_module(roce_facts.main, args(fixture_path, 'direct-pair/spark1',
                                                      '10.10.0.1'))
    assert failed
    assert result['msg'].startswith('RoCE data path on 10.10.0.1: ')
    assert 'management NIC' in result['msg']


def test_problems_can_be_reported_without_failing(run_module, fixture_path):
    failed, result = run_module(roce_facts.main, args(fixture_path, 'roce-down/spark2',
                                                      '192.168.100.20', fail_on_problems=False))
    assert not failed
    assert result['problems']


def test_peers_that_disagree_fail(run_module, fixture_path):
    failed, peer = run_module(roce_facts.main, args(fixture_path, 'bonded-pair/spark2', '10.0.0.2'))
    assert not failed
    peer['host'] = 'spark2'
    failed, result = run_module(roce_facts.main, args(fixture_path, 'direct-pair/spark1',
                                                      '192.168.100.10', peers=[peer]))
    assert failed
    assert 'spark2=5' in result['msg'] and 'this node=3' in result['msg']


def test_ring_mode(run_module, fixture_path):
    failed, result = run_module(roce_facts.main, args(fixture_path, 'ring3/spark3', '10.10.0.3',
                                                      transport='roce_ring'))
    assert not failed, result['msg'] if failed else ''
    assert result['addr_range'] == '192.168.96.0/20'
    assert result['gid_index'] is None


def test_bad_address_json_is_a_clear_failure(run_module, fixture_path):
    failed, result = run_module(roce_facts.main, {
        'sys_root': fixture_path('sysfs', 'direct-pair', 'spark1'), 'cluster_ip': '192.168.100.10',
        'ip_addr_json': '<html>'})
    assert failed and 'ip -j addr' in result['msg']


def test_without_ip_addr_json_it_runs_ip_j_addr(run_module, fixture_path, tmp_path, monkeypatch):
    fake_ip = tmp_path / 'ip'
    fake_ip.write_text('#!/bin/sh\n[ "$1 $2" = "-j addr" ] || exit 1\ncat %s\n'
                       % fixture_path('sysfs', 'bonded-pair', 'spark1', 'ip-addr.json'))
    fake_ip.chmod(0o755)
    monkeypatch.setenv('PATH', '%s:/usr/bin:/bin' % tmp_path)
    failed, result = run_module(roce_facts.main, {
        'sys_root': fixture_path('sysfs', 'bonded-pair', 'spark1'), 'cluster_ip': '10.0.0.1'})
    assert not failed, result.get('msg')
    assert result['cluster_iface'] == 'bond0' and result['gid_index'] == 5
