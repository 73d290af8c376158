import pytest

from ansible_collections.gb10.serving.plugins.module_utils.memory_balance import (
    MemoryBalanceError,
    balance,
)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H5", "H6")


def node(available, total=119.7):
    return {'available_gib': available, 'total_gib': total}


def test_field_report_7_gb_gap_is_within_10_percent_and_sizes_for_the_poorer_node():
    # seed 000: Spark 1 107 GB, Spark 2 100 GB available after reboot
    result = balance({'spark1': node(107), 'spark2': node(100)})
    assert result['balanced'] is True
    assert result['spread_gib'] == 7.0
    assert result['poorest'] == 'spark2'
    assert result['utilization'] == 0.82  # (100 - 1) / 119.7 = 0.827 -> 0.82
    assert result['limited_by'] == 'spark2'


def test_healthy_nodes_are_capped_at_0_90():
    result = balance({'spark1': node(114.3), 'spark2': node(114.0)})
    assert result['utilization'] == 0.90
    assert result['limited_by'] == 'ceiling'


def test_leaked_node_breaks_sglangs_10_percent_rule():
    # seed 000: 33 GB leaked on Spark 2
    result = balance({'spark1': node(114.0), 'spark2': node(81.0)})
    assert result['balanced'] is False
    assert result['spread_fraction'] > 0.28


def test_lower_ceiling_for_shared_boxes():
    assert balance({'a': node(114), 'b': node(114)}, ceiling=0.82)['utilization'] == 0.82


def test_bad_input_names_the_host():
    with pytest.raises(MemoryBalanceError, match='spark2: available_gib missing'):
        balance({'spark1': node(100), 'spark2': {'total_gib': 119.7}})
    with pytest.raises(MemoryBalanceError, match='no nodes'):
        balance({})
    with pytest.raises(MemoryBalanceError, match='above total_gib'):
        balance({'spark1': node(200)})
