"""Module gb10.serving.cluster_link_plan: reads sysfs (fixture trees), `ip -j addr` and the other
netplan files of the node, and returns the plan or fails before anything changes."""
import pytest
import json

import yaml

from ansible_collections.gb10.serving.plugins.modules import cluster_link_plan

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("N3")

PAIR = [
    {'host': 'spark1', 'mode': 'bond', 'ports': 'detect', 'address': '10.0.0.1', 'prefix': 24,
     'management': ['10.10.0.1'], 'mtu': 9000},
    {'host': 'spark2', 'mode': 'bond', 'ports': 'detect', 'address': '10.0.0.2', 'prefix': 24,
     'management': ['10.10.0.2'], 'mtu': 9000},
]


def args(fixture_path, tmp_path, tree='bonded-pair/spark1', cluster=None, ip_json=None, **extra):
    parts = tree.split('/')
    if ip_json is None:
        with open(fixture_path('sysfs', *(parts + ['ip-addr.json']))) as handle:
            ip_json = handle.read()
    out = {'host': 'spark1', 'cluster': cluster or PAIR, 'sys_root': fixture_path('sysfs', *parts),
           'ip_addr_json': ip_json, 'netplan_dir': str(tmp_path)}
    out.update(extra)
    return out


def fresh_ip_json(fixture_path, tree):
    """The fixture's `ip -j addr` with the CX7 ports stripped of addresses: a fresh Spark."""
    with open(fixture_path('sysfs', *(tree.split('/') + ['ip-addr.json']))) as handle:
        links = json.load(handle)
    for link in links:
        if link['ifname'].startswith(('enp1', 'enP2', 'bond')):
            link['addr_info'] = []
    return json.dumps([link for link in links if link['ifname'] != 'bond0'])


def test_doc_blocks_are_yaml(module_doc):
    doc = module_doc(cluster_link_plan)
    assert doc['module'] == 'cluster_link_plan'
    assert doc['attributes']['check_mode']['support'] == 'full'
    assert isinstance(yaml.safe_load(cluster_link_plan.EXAMPLES), list)
    assert yaml.safe_load(cluster_link_plan.RETURN)


def test_bond_on_a_fresh_spark_is_planned_with_drift(run_module, fixture_path, tmp_path):
    failed, result = run_module(cluster_link_plan.main, args(
        fixture_path, tmp_path, ip_json=fresh_ip_json(fixture_path, 'bonded-pair/spark1')), check_mode=True)
    assert not failed, result
    assert result['changed'] is False
    assert result['detected'] == ['enP2p1s0f0np0', 'enp1s0f0np0']
    assert result['ports'] == ['enP2p1s0f0np0', 'enp1s0f0np0']
    assert result['checks'] == [{'iface': 'bond0', 'address': '10.0.0.1/24', 'peer': 'spark2', 'peer_ip': '10.0.0.2'}]
    assert result['drift'] == ['bond0 does not exist yet']
    assert yaml.safe_load(result['content'])['network']['bonds']['bond0']['addresses'] == ['10.0.0.1/24']
    assert set(result) - {'changed', 'invocation'} == set(yaml.safe_load(cluster_link_plan.RETURN))


def test_bond_already_in_place_has_no_drift(run_module, fixture_path, tmp_path):
    failed, result = run_module(cluster_link_plan.main, args(fixture_path, tmp_path))
    assert not failed, result
    assert result['drift'] == []


def test_refusal_names_host_variable_and_fix(run_module, fixture_path, tmp_path):
    cluster = [dict(PAIR[0]), dict(PAIR[1], address='10.0.0.1')]
    failed, result = run_module(cluster_link_plan.main, args(fixture_path, tmp_path, cluster=cluster))
    assert failed
    assert result['msg'].startswith('cluster link refused before anything changed: ')
    assert 'hosts spark1 and spark2: cluster address 10.0.0.1 is used by more than one host' in result['msg']
    assert 'Fix:' in result['msg']


def test_other_netplan_file_is_read_and_ours_is_not(run_module, fixture_path, tmp_path):
    (tmp_path / '60-gb10-cluster-link.yaml').write_text('network:\n  bonds:\n    bond0: {}\n')
    failed, result = run_module(cluster_link_plan.main, args(fixture_path, tmp_path))
    assert not failed, result
    (tmp_path / '50-cloud-init.yaml').write_text('network:\n  ethernets:\n    enp1s0f0np0:\n      dhcp4: true\n')
    failed, result = run_module(cluster_link_plan.main, args(fixture_path, tmp_path, fail_on_problems=False))
    assert not failed
    assert any('50-cloud-init.yaml also configures enp1s0f0np0' in p for p in result['problems'])


def test_single_with_two_detected_ports_is_refused(run_module, fixture_path, tmp_path):
    cluster = [dict(e, mode='single', address=a) for e, a in zip(PAIR, ('192.168.100.10', '192.168.100.20'))]
    failed, result = run_module(cluster_link_plan.main, args(
        fixture_path, tmp_path, tree='direct-pair/spark1', cluster=cluster))
    assert failed
    assert 'host spark1: mode single uses exactly one port but 2 port(s) are detected' in result['msg']


def test_bad_ip_json_is_a_clear_failure(run_module, fixture_path, tmp_path):
    failed, result = run_module(cluster_link_plan.main, args(fixture_path, tmp_path, ip_json='not json'))
    assert failed
    assert 'ip -j addr' in result['msg']


def test_without_ip_addr_json_it_runs_ip_j_addr(run_module, fixture_path, tmp_path, monkeypatch):
    fake = tmp_path / 'bin'
    fake.mkdir()
    (fake / 'ip').write_text('#!/bin/sh\ncat %s\n' % fixture_path('sysfs', 'bonded-pair', 'spark1', 'ip-addr.json'))
    (fake / 'ip').chmod(0o755)
    monkeypatch.setenv('PATH', '%s:/usr/bin:/bin' % fake)
    failed, result = run_module(cluster_link_plan.main, args(fixture_path, tmp_path, ip_json=''))
    assert not failed, result
    assert result['drift'] == []
