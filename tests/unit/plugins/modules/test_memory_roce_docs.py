"""The documentation blocks of the memory and RoCE modules parse, and every returned key the
modules produce is documented in RETURN (ansible-doc renders them)."""
import pytest
import yaml

from ansible_collections.gb10.serving.plugins.modules import memory_balance, roce_facts, unified_memory


@pytest.mark.parametrize('module', [unified_memory, roce_facts, memory_balance])
def test_doc_blocks_are_yaml(module, module_doc):
    doc = module_doc(module)
    assert doc['module'] == module.__name__.rsplit('.', 1)[-1]
    assert doc['attributes']['check_mode']['support'] == 'full'
    assert isinstance(yaml.safe_load(module.EXAMPLES), list)
    assert yaml.safe_load(module.RETURN)


def test_every_unified_memory_result_key_is_documented(run_module, tmp_path, fixture_path):
    smi = tmp_path / 'nvidia-smi'
    smi.write_text('#!/bin/sh\ncase "$1" in --query-gpu=*) cat %s ;; esac\n'
                   % fixture_path('nvidia-smi', 'gb10-580.142.query-gpu.csv'))
    smi.chmod(0o755)
    (tmp_path / 'meminfo').write_text(open(fixture_path('proc', 'meminfo.gb10-after-load')).read())
    failed, result = run_module(unified_memory.main, {
        'proc_root': str(tmp_path), 'nvidia_smi': str(smi), 'gpu_source': 'nvidia_smi',
        'cuda_probe': 'none'})
    assert not failed
    documented = set(yaml.safe_load(unified_memory.RETURN))
    assert set(result) - {'changed', 'invocation'} == documented


def test_every_roce_facts_result_key_is_documented(run_module, fixture_path):
    with open(fixture_path('sysfs', 'direct-pair', 'spark1', 'ip-addr.json')) as handle:
        text = handle.read()
    failed, result = run_module(roce_facts.main, {
        'sys_root': fixture_path('sysfs', 'direct-pair', 'spark1'), 'cluster_ip': '192.168.100.10',
        'ip_addr_json': text})
    assert not failed
    assert set(result) - {'changed', 'invocation'} == set(yaml.safe_load(roce_facts.RETURN))


def test_every_memory_balance_result_key_is_documented(run_module):
    failed, result = run_module(memory_balance.main, {'nodes': {
        'a': {'available_gib': 110, 'total_gib': 119.7}}})
    assert not failed
    assert set(result) - {'changed', 'invocation'} == set(yaml.safe_load(memory_balance.RETURN))
