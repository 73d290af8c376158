# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU clock under load (plugins/module_utils/gpu_clock.py, rule H12): the readings the node's
exporter keeps and the verdict it publishes. The fixture kit's nvidia-smi answers the same query
(tests/unit/plugins/modules/test_gb10_sim_kit.py); the simulated cluster shows the verdict in
Prometheus (tests/e2e/test_4b_watchdog.py)."""

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import gpu_clock, node_metrics
from ansible_collections.gb10.serving.plugins.module_utils.gpu_clock import ClockError, keep, parse, verdict

pytestmark = pytest.mark.rule("H12")

FLOOR = 1500


def test_the_query_is_what_the_parser_reads():
    assert gpu_clock.query_args() == ['--query-gpu=clocks.sm,utilization.gpu', '--format=csv,noheader,nounits']
    assert parse('695, 96\n') == (695, 96)
    assert parse('\n2398, 100\n') == (2398, 100)


@pytest.mark.parametrize('text', ['', '695\n', '695 MHz, 96 %\n', '[N/A], 96\n'])
def test_output_that_does_not_answer_the_query_is_refused_with_what_it_printed(text):
    with pytest.raises(ClockError) as failed:
        parse(text)
    assert 'clocks.sm,utilization.gpu' in str(failed.value)


def test_only_readings_under_load_are_kept_and_only_the_last_three():
    readings = keep([], 890, 0, 1.0)  # idle: a GPU clocks down on its own
    assert readings == []
    readings = keep(readings, 2398, 49, 2.0)
    assert readings == []
    for at, clock in enumerate((2398, 702, 695, 700), 3):
        readings = keep(readings, clock, 96, float(at))
    assert readings == [(702, 96, 4.0), (695, 96, 5.0), (700, 96, 6.0)]
    assert keep(readings, 2223, 0, 7.0) == readings


def test_the_verdict_is_the_median_under_load_against_the_floor():
    assert verdict([], FLOOR) == {'state': 'unknown', 'clock_mhz': None, 'readings': 0, 'at': None}
    stuck = [(702, 96, 1.0), (695, 96, 2.0), (2398, 96, 3.0)]  # one good reading clears nothing
    assert verdict(stuck, FLOOR) == {'state': 'low', 'clock_mhz': 702, 'readings': 3, 'at': 3.0}
    healthy = [(2398, 96, 1.0), (858, 96, 2.0), (2390, 100, 3.0)]  # one ramping reading stains nothing
    assert verdict(healthy, FLOOR)['state'] == 'ok' and verdict(healthy, FLOOR)['clock_mhz'] == 2390
    assert verdict([(1400, 90, 1.0), (1600, 90, 2.0)], FLOOR)['clock_mhz'] == 1500.0
    assert verdict([(1499, 90, 1.0)], FLOOR)['state'] == 'low' and verdict([(1500, 90, 1.0)], FLOOR)['state'] == 'ok'
    # A cap an owner sets for heat (2000 MHz) is no stuck state.
    assert verdict([(2000, 99, 1.0)] * 3, FLOOR)['state'] == 'ok'


def test_the_line_names_the_node_the_figures_and_the_power_cycle():
    line = gpu_clock.describe('spark2', 702, FLOOR)
    assert line.startswith('spark2: GPU clock 702 MHz under load, below 1500 MHz') and '(H12)' in line
    assert 'off AC power' in line and 'reboot does not clear' in line


def page(clock, readings):
    found = {}
    for line in node_metrics.clock_text(clock, verdict(readings, FLOOR), FLOOR).splitlines():
        if line and not line.startswith('#'):
            name, value = line.split(' ')
            found[name] = value
    return found


def test_the_exporter_publishes_the_reading_and_the_verdict_under_load():
    assert page((2223, 0), []) == {'gb10_gpu_sm_clock_mhz': '2223', 'gb10_gpu_utilization_percent': '0',
                                   'gb10_gpu_clock_floor_mhz': '1500'}
    stuck = page((702, 96), [(702, 96, 1700000000.5)])
    assert stuck['gb10_gpu_clock_low'] == '1' and stuck['gb10_gpu_sm_clock_under_load_mhz'] == '702'
    assert stuck['gb10_gpu_clock_under_load_timestamp_seconds'] == '1700000000.5'
    # Idle again, the verdict of the last load stays (the state does not clear by itself).
    assert page((890, 0), [(702, 96, 1.0)])['gb10_gpu_clock_low'] == '1'
    assert page((2398, 97), [(2398, 97, 1.0)])['gb10_gpu_clock_low'] == '0'
    # No answer from nvidia-smi: no reading, the verdict of the readings before it stays.
    assert 'gb10_gpu_sm_clock_mhz' not in page(None, [(702, 96, 1.0)])
