# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's alert rules (roles/node_metrics/files/prometheus-rules-gb10-serving.yml), evaluated
by Prometheus's own rule engine (`promtool test rules`) over series shaped as the exporters serve
them: each alert fires for the node it names, after its `for`, and stays quiet on a healthy node."""
import os
import shutil
import subprocess

import pytest
import yaml

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
RULES = os.path.join(TOP, 'roles', 'node_metrics', 'files', 'prometheus-rules-gb10-serving.yml')

pytestmark = [pytest.mark.rule("O6", "O4", "H4", "N5"),
              pytest.mark.skipif(shutil.which('promtool') is None,
                                 reason="promtool is not installed (scripts/host-deps.sh installs Debian's prometheus)")]


def rules():
    with open(RULES) as handle:
        return dict((rule['alert'], rule) for rule in yaml.safe_load(handle)['groups'][0]['rules'])


def expected(alert, node, job='gb10-node', **labels):
    """The alert as a user sees it: its severity, the series' labels, and the annotations with the node."""
    rule = rules()[alert]
    return {'exp_labels': dict(rule['labels'], job=job, node=node, **labels),
            'exp_annotations': dict((k, v.strip().replace('{{ $labels.node }}', node).replace('{{ $labels.job }}', job))
                                    for k, v in rule['annotations'].items())}


def series(name, node, values, job='gb10-node'):
    return {'series': '%s{job="%s",node="%s"}' % (name, job, node), 'values': values}


def promtool(tmp_path, input_series, checks):
    spec = {'rule_files': [RULES], 'evaluation_interval': '15s',
            'tests': [{'interval': '15s', 'input_series': input_series, 'alert_rule_test': checks}]}
    path = tmp_path / 'rules-test.yml'
    path.write_text(yaml.safe_dump(spec))
    return subprocess.run(['promtool', 'test', 'rules', str(path)], capture_output=True, text=True, timeout=60, check=False)


def test_the_rules_load_in_prometheus():
    out = subprocess.run(['promtool', 'check', 'rules', RULES], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0 and '9 rules found' in out.stdout, out.stdout + out.stderr


def test_each_fault_fires_its_alert_for_its_node_and_a_healthy_node_fires_none(tmp_path):
    # spark1 (the head) stops answering at 30 s; spark2 leaks and its link check fails; spark2's
    # memory falls to 2.4 of 119.7 GiB; the watchdog spends its budget; spark2's exporter stops.
    healthy = {'gb10_unified_memory_leaked': '0x40', 'gb10_link_check_ok': '1x40',
               'gb10_unified_memory_available_gib': '20x40', 'gb10_unified_memory_total_gib': '119.7x40'}
    input_series = [series(name, 'spark1', values) for name, values in healthy.items()] + [
        series('gb10_engine_answering', 'spark1', '1 1 0x38'),
        series('gb10_engine_answer_correct', 'spark1', '1x40'),
        series('gb10_watchdog_restart_budget_left', 'spark1', '3 2 1 0x37'),
        series('up', 'spark1', '1x40'),
        series('gb10_unified_memory_leaked', 'spark2', '0 0 0 0 1x36'),
        series('gb10_link_check_ok', 'spark2', '0x40'),
        series('gb10_unified_memory_available_gib', 'spark2', '20 20 2.4x38'),
        series('gb10_unified_memory_total_gib', 'spark2', '119.7x40'),
        series('up', 'spark2', '1 1 1 1 0x36'),
    ]

    def at(alert, when, *alerts):
        return {'eval_time': when, 'alertname': alert, 'exp_alerts': list(alerts)}
    checks = [
        # Within their `for`, nothing yet: one late probe or scrape is no alert.
        at('GB10EngineDown', '1m'), at('GB10MemoryLow', '3m'), at('GB10ScrapeDown', '1m'),
        at('GB10EngineDown', '3m', expected('GB10EngineDown', 'spark1')),
        at('GB10UnifiedMemoryLeaked', '1m', expected('GB10UnifiedMemoryLeaked', 'spark2')),
        at('GB10LinkUnderFloor', '1m', expected('GB10LinkUnderFloor', 'spark2')),
        at('GB10RestartBudgetSpent', '1m', expected('GB10RestartBudgetSpent', 'spark1')),
        at('GB10MemoryLow', '6m', expected('GB10MemoryLow', 'spark2')),
        at('GB10ScrapeDown', '4m', expected('GB10ScrapeDown', 'spark2')),
        # The head's known answer stays right: no alert.
        at('GB10KnownAnswerWrong', '6m'),
    ]
    out = promtool(tmp_path, input_series, checks)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_wrong_known_answer_fires_at_once(tmp_path):
    out = promtool(tmp_path, [series('gb10_engine_answer_correct', 'spark1', '1 0x10')],
                   [{'eval_time': '30s', 'alertname': 'GB10KnownAnswerWrong',
                     'exp_alerts': [expected('GB10KnownAnswerWrong', 'spark1')]}])
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.rule("H12")
def test_a_node_whose_gpu_clock_is_stuck_low_under_load_is_named_and_a_healthy_one_is_not(tmp_path):
    # Series as the exporter serves them (module_utils node_metrics.clock_text): spark2's verdict turns
    # low after its readings under load, spark1's stays ok; no reading under load yet gives no series.
    out = promtool(tmp_path, [series('gb10_gpu_clock_low', 'spark1', '0x10'),
                              series('gb10_gpu_clock_low', 'spark2', '0 0 1x8')],
                   [{'eval_time': '15s', 'alertname': 'GB10GpuClockLow', 'exp_alerts': []},
                    {'eval_time': '1m', 'alertname': 'GB10GpuClockLow',
                     'exp_alerts': [expected('GB10GpuClockLow', 'spark2')]}])
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_node_whose_reader_stopped_is_named_once_its_page_is_a_minute_old(tmp_path):
    # The read time as the reader writes it (the Unix time of each read; promtool's clock starts at
    # 0): spark1 reads every 15 s, spark2's reader stops after its read at 60 s and the node exporter
    # keeps serving that page. Stale past 60 s from 135 s on, for 1m: firing from 195 s.
    out = promtool(tmp_path, [series('gb10_node_metrics_read_timestamp_seconds', 'spark1', '0+15x40'),
                              series('gb10_node_metrics_read_timestamp_seconds', 'spark2', '0+15x4 60x35')],
                   [{'eval_time': '2m', 'alertname': 'GB10NodeReadingStale', 'exp_alerts': []},
                    {'eval_time': '3m', 'alertname': 'GB10NodeReadingStale', 'exp_alerts': []},
                    {'eval_time': '4m', 'alertname': 'GB10NodeReadingStale',
                     'exp_alerts': [expected('GB10NodeReadingStale', 'spark2')]}])
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_rule_that_would_not_fire_is_caught(tmp_path):
    # The harness itself: promtool fails a check whose alert does not come.
    out = promtool(tmp_path, [series('gb10_engine_answering', 'spark1', '1x20')],
                   [{'eval_time': '3m', 'alertname': 'GB10EngineDown', 'exp_alerts': [expected('GB10EngineDown', 'spark1')]}])
    assert out.returncode != 0 and 'GB10EngineDown' in out.stdout + out.stderr
