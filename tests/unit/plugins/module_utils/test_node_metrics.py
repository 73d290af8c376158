# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's metrics page (plugins/module_utils/node_metrics.py, rule O6): the unified_memory
module's reading as Prometheus text, and the collection's textfiles beside it. The exporter that
serves it runs in molecule/node_metrics and on the simulated cluster (tests/e2e/test_4b_watchdog.py)."""

import pytest
import re

from ansible_collections.gb10.serving.plugins.module_utils import node_metrics as nm
from ansible_collections.gb10.serving.plugins.module_utils.unified_memory import measure

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O6")

# A GB10 with 33 GiB held by the driver and no GPU process (rule H4), as the module reads it.
LEAKED_MEMINFO = ('MemTotal: 125510140 kB\nMemFree: 85000000 kB\nMemAvailable: 86000000 kB\n'
                  'Cached: 400000 kB\nAnonPages: 3145728 kB\nShmem: 51200 kB\nSUnreclaim: 307200 kB\n')
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def gb10_reading(tmp_path, fixture_path):
    (tmp_path / 'meminfo').write_text(LEAKED_MEMINFO)
    answers = {'--query-gpu': fixture_path('nvidia-smi', 'gb10-580.142.query-gpu.csv'),
               '--query-compute-apps': fixture_path('nvidia-smi', 'gb10-580.142.query-compute-apps.idle.csv')}

    def run(argv):
        assert argv[0] == 'nvidia-smi'
        with open(answers[argv[1].split('=')[0]]) as handle:
            return 0, handle.read(), ''

    reading, _warnings = measure(run, proc_root=str(tmp_path), gpu_source='nvidia_smi', cuda_probe='none')
    return reading


def samples(text):
    """{name{labels}: value} of a Prometheus text page; every sample line must parse, and every
    metric must have its TYPE line before its first sample."""
    found, typed = {}, set()
    for line in text.splitlines():
        if line.startswith('# TYPE '):
            typed.add(line.split()[2])
            continue
        if line.startswith('#') or not line:
            continue
        match = SAMPLE.match(line)
        assert match, line
        assert match.group(1) in typed, line
        found[match.group(1) + (match.group(2) or '')] = match.group(3)
    return found


def test_the_page_carries_the_module_figures_as_the_module_reports_them(tmp_path, fixture_path):
    reading = gb10_reading(tmp_path, fixture_path)
    page = samples(nm.metrics_text(reading, None, 1700000000.0, 0.25))
    # The same numbers, unit and rounding as the module's return: a scrape and a module run agree.
    for key in ('total_gib', 'available_gib', 'unaccounted_gib', 'leak_threshold_gib', 'page_cache_gib'):
        assert float(page['gb10_unified_memory_' + key]) == reading[key], key
    assert reading['leaked'] and page['gb10_unified_memory_leaked'] == '1'
    assert page['gb10_gpu_workload'] == '0' and page['gb10_gpu_processes'] == '0'
    assert page['gb10_unified_memory_unified'] == '1'
    assert page['gb10_node_metrics_read_ok'] == '1'
    assert page['gb10_node_metrics_read_timestamp_seconds'] == '1700000000.0'
    info = [key for key in page if key.startswith('gb10_gpu_info{')]
    assert info == ['gb10_gpu_info{driver_version="580.142",index="0",name="NVIDIA GB10"}'], info
    # No CUDA view (the exporter's default): its series are left out, not published as 0.
    assert not any(key.startswith('gb10_unified_memory_cuda_') for key in page)


def test_a_failed_read_publishes_only_that_it_failed(tmp_path):
    page = samples(nm.metrics_text(None, 'nvidia-smi failed (rc=9)', 1700000000.0, 0.1))
    assert page['gb10_node_metrics_read_ok'] == '0'
    # No stale or made-up figures: Prometheus sees the series go absent.
    assert not any(key.startswith('gb10_unified_memory') for key in page), page


def test_labels_are_escaped():
    reading = {'gpus': [{'index': 0, 'name': 'GPU "x"\\y', 'uuid': 'u'}], 'driver_version': '580.142',
               'leaked': False, 'unified': True, 'gpu_workload': False, 'gpu_processes': []}
    page = nm.metrics_text(reading, None, 1.0, 0.0)
    assert 'name="GPU \\"x\\"\\\\y"' in page, page


def test_textfiles_below_the_state_folder_are_served_after_the_node_figures(tmp_path):
    (tmp_path / 'watchdog').mkdir()
    (tmp_path / 'link_check').mkdir()
    (tmp_path / 'watchdog' / 'metrics.prom').write_text('gb10_watchdog_up 1\n')
    (tmp_path / 'link_check' / 'link.prom').write_text('gb10_link_check_ok 1')  # no final newline
    (tmp_path / 'link_check' / 'allreduce_probe.py').write_text('not metrics\n')
    files = nm.textfiles(str(tmp_path))
    assert [found[0] for found in files] == [str(tmp_path / 'link_check' / 'link.prom'),
                                             str(tmp_path / 'watchdog' / 'metrics.prom')]
    page = nm.page('gb10_node_metrics_read_ok 1\n', files)
    assert page.splitlines() == [
        'gb10_node_metrics_read_ok 1',
        '# from %s' % (tmp_path / 'link_check' / 'link.prom'), 'gb10_link_check_ok 1',
        '# from %s' % (tmp_path / 'watchdog' / 'metrics.prom'), 'gb10_watchdog_up 1']


def test_no_state_folder_yet_serves_the_node_figures_alone(tmp_path):
    assert nm.textfiles(str(tmp_path / 'absent')) == []


def test_every_series_of_the_grafana_dashboard_is_one_the_cluster_publishes(tmp_path, fixture_path):
    """The dashboard's gb10_ series are the exporter's (memory and clock), the link check's textfile's or the
    watchdog's; the rest are the engine's own (vllm:) or Prometheus' (up). That each one has data
    on a running cluster is tests/e2e/test_4b_watchdog.py's."""
    import json
    import os

    from ansible_collections.gb10.serving.plugins.module_utils import watchdog

    top = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')
    reading = gb10_reading(tmp_path, fixture_path)
    reading.update(cuda_free_gib=1.0, cuda_total_gib=2.0)
    published = set(samples(nm.metrics_text(reading, None, 1.0, 0.0)))
    published |= set(samples(nm.clock_text((702, 96), {'state': 'low', 'clock_mhz': 702, 'readings': 1, 'at': 1.0}, 1500)))
    published |= set(samples(watchdog.metrics_text({'last_probe': {'verdict': 'ok', 'ttft_s': 0.1, 'at': 1.0}},
                                                   1.0, 3, 3600)))
    with open(os.path.join(top, 'roles', 'link_check', 'templates', 'link.prom.j2')) as handle:
        published |= set(re.findall(r'(?m)^(gb10_\w+)', handle.read()))
    names = {key.split('{')[0] for key in published}
    with open(os.path.join(top, 'roles', 'node_metrics', 'files', 'grafana-gb10-serving.json')) as handle:
        dashboard = json.load(handle)
    exprs = [target['expr'] for panel in dashboard['panels'] for target in panel.get('targets', [])]
    assert len(exprs) >= 10, exprs
    for expr in exprs:
        for name in re.findall(r'[a-zA-Z_:][a-zA-Z0-9_:]*(?=[\s{\[)]|$)', expr):
            if name.startswith('gb10_'):
                assert name in names, (expr, sorted(names))
            else:
                assert name.startswith('vllm:') or name in ('up', 'rate'), expr
