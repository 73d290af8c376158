import pytest
from ansible_collections.gb10.serving.plugins.modules import memory_balance

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H5", "H6")


def test_unbalanced_cluster_fails_naming_the_poor_node(run_module):
    failed, result = run_module(memory_balance.main, {'nodes': {
        'spark1': {'available_gib': 114.0, 'total_gib': 119.7},
        'spark2': {'available_gib': 81.0, 'total_gib': 119.7, 'leaked': True}}})
    assert failed
    assert 'spark2 has 81.0 GiB free, spark1 has 114.0 GiB' in result['msg']
    assert 'recover.yml' in result['msg']
    assert result['utilization'] == 0.66


def test_report_only_mode(run_module):
    failed, result = run_module(memory_balance.main, {'fail_on_imbalance': False, 'nodes': {
        'spark1': {'available_gib': 114.0, 'total_gib': 119.7},
        'spark2': {'available_gib': 81.0, 'total_gib': 119.7}}}, check_mode=True)
    assert not failed and result['balanced'] is False and result['changed'] is False


def test_ceiling_above_0_90_is_refused(run_module):
    failed, result = run_module(memory_balance.main, {'ceiling': 0.95, 'nodes': {
        'spark1': {'available_gib': 114.0, 'total_gib': 119.7}}})
    assert failed and 'rule H6' in result['msg']


def test_missing_figures_fail_cleanly(run_module):
    failed, result = run_module(memory_balance.main, {'nodes': {'spark1': 'lots'}})
    assert failed and 'spark1' in result['msg']
