from ansible_collections.gb10.serving.plugins.module_utils.meminfo import parse_meminfo
import json

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.unified_memory import (
    DEFAULT_LEAK_THRESHOLD_GIB,
    FIELD_CUDA_OFFSET_GIB,
    MeasureError,
    assess,
    baseline_to_record,
    read_baseline,
)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H4")

GIB = 1024 ** 3
KIB = 1024
TOTAL_KB = 125510140  # 119.7 GiB, a Spark


def meminfo(available_gib, anon_gib=3.0, shmem_kb=51200, sunreclaim_kb=307200, cache_kb=500000):
    available = int(available_gib * 1048576)
    return parse_meminfo(
        'MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\nBuffers: 20480 kB\n'
        'Cached: %d kB\nAnonPages: %d kB\nShmem: %d kB\nSUnreclaim: %d kB\n'
        'KernelStack: 20480 kB\nPageTables: 61440 kB\n'
        % (TOTAL_KB, available - cache_kb, available, cache_kb - 29370, int(anon_gib * 1048576),
           shmem_kb, sunreclaim_kb))


def gb10_cuda(fields, offset_gib=FIELD_CUDA_OFFSET_GIB, leak_gib=0.0):
    """(total, free) as a GB10's cuMemGetInfo reports them: free follows MemFree, less the
    driver's offset and what leaked."""
    return TOTAL_KB * KIB, int(fields['MemFree'] - (offset_gib + leak_gib) * GIB)


def test_default_threshold_sits_between_normal_and_reported_leaks():
    assert 3 < DEFAULT_LEAK_THRESHOLD_GIB < 33


def test_healthy_node_has_little_unaccounted_and_no_leak():
    result = assess(meminfo(115.2))
    assert result['unaccounted_gib'] < 2
    assert result['leaked'] is False
    assert result['unaccounted_basis'] == 'meminfo'


def test_33_gib_missing_from_meminfo_is_a_leak():
    result = assess(meminfo(82.0))
    assert 33 < result['unaccounted_gib'] < 34.5
    assert result['leaked'] is True


def test_processes_memory_is_not_a_leak():
    # 40 GiB of anonymous memory belongs to processes: used, but accounted for
    result = assess(meminfo(75.0, anon_gib=40.0))
    assert result['processes_gib'] > 40
    assert result['leaked'] is False


def test_leak_seen_only_by_cuda_counts_when_cuda_sees_the_whole_pool():
    # "free -g shows plenty of RAM" yet SGLang saw 33 GB occupied: CUDA's free is the tell
    fields = meminfo(115.2)
    result = assess(fields, cuda=gb10_cuda(fields, leak_gib=33.0))
    assert result['unaccounted_basis'] == 'cuda'
    assert 32.9 < result['unaccounted_gib'] < 33.1
    assert result['leaked'] is True
    assert result['cuda_sees_whole_pool'] is True


def test_a_clean_gb10_with_undroppable_cache_is_healthy():
    # The field's clean node: CUDA free ~9.5 GiB below MemFree. With 1.5 GiB of page cache that no
    # drop frees (mapped files of running services), MemAvailable - CUDA free is 11 GiB: over the
    # threshold by the old reading, which rebooted healthy nodes. MemFree's offset is the clean one.
    fields = meminfo(115.2, cache_kb=int(1.5 * 1048576))
    result = assess(fields, cuda=gb10_cuda(fields))
    assert (fields['MemAvailable'] - gb10_cuda(fields)[1]) / GIB > DEFAULT_LEAK_THRESHOLD_GIB
    assert result['leaked'] is False
    assert result['cuda_offset_gib'] == 9.5
    assert result['healthy_offset_source'] == 'field'
    assert result['unaccounted_basis'] == 'meminfo'


def test_a_baseline_is_the_clean_offset_both_ways():
    fields = meminfo(115.2)
    # A driver that keeps 14 GiB: 8 GiB more is a leak against its baseline, not against the field's.
    eight_more = gb10_cuda(fields, offset_gib=14.0, leak_gib=8.0)
    assert assess(fields, cuda=eight_more)['leaked'] is True
    judged = assess(fields, cuda=eight_more, baseline={'cuda_offset_gib': 14.0})
    assert judged['leaked'] is False and judged['healthy_offset_source'] == 'baseline'
    # A driver that keeps 4 GiB: a 14 GiB leak is under the threshold by the field's offset only.
    leak = gb10_cuda(fields, offset_gib=4.0, leak_gib=14.0)
    assert assess(fields, cuda=leak)['leaked'] is False
    assert assess(fields, cuda=leak, baseline={'cuda_offset_gib': 4.0})['leaked'] is True


def reading(fields, cuda, baseline=None, apps=None):
    return assess(fields, gpu_apps=apps, cuda=cuda, baseline=baseline)


def test_only_a_clean_reading_becomes_the_baseline():
    fields = meminfo(115.2)
    clean = reading(fields, gb10_cuda(fields, offset_gib=9.8))
    record = baseline_to_record(clean, 'if_missing', 'first clean measurement', now=0)
    assert record == {'cuda_offset_gib': 9.8, 'recorded_at': '1970-01-01T00:00:00Z',
                      'reason': 'first clean measurement'}
    assert baseline_to_record(clean, 'never', '') is None
    # A node that leaked before the collection first saw it: its leak is not its normal.
    leaked = reading(fields, gb10_cuda(fields, leak_gib=33.0))
    assert baseline_to_record(leaked, 'replace', 'after a reboot') is None
    # A GPU process runs: its memory may be in the figure.
    busy = reading(fields, gb10_cuda(fields), apps=[{'pid': 7, 'name': 'python3', 'used_bytes': None}])
    assert baseline_to_record(busy, 'if_missing', '') is None
    # No whole-pool CUDA view (the modprobe override, H2): nothing to record.
    capped = reading(fields, (66571993088, 50 * GIB))
    assert baseline_to_record(capped, 'replace', '') is None
    # if_missing keeps a baseline that is there; replace writes over it.
    known = reading(fields, gb10_cuda(fields, offset_gib=9.8), baseline={'cuda_offset_gib': 9.6})
    assert baseline_to_record(known, 'if_missing', '') is None
    assert baseline_to_record(known, 'replace', 'after a reboot')['cuda_offset_gib'] == 9.8
    with pytest.raises(ValueError):
        baseline_to_record(clean, 'always', '')


def test_a_baseline_file_is_read_or_refused_with_the_fix(tmp_path):
    path = tmp_path / 'baseline.json'
    assert read_baseline(str(path)) is None
    assert read_baseline('') is None
    path.write_text(json.dumps({'cuda_offset_gib': 9.7, 'recorded_at': 'x', 'reason': 'y'}))
    assert read_baseline(str(path))['cuda_offset_gib'] == 9.7
    for bad in ('{', '{"offset": 1}', '{"cuda_offset_gib": -1}'):
        path.write_text(bad)
        with pytest.raises(MeasureError) as refused:
            read_baseline(str(path))
        assert str(path) in str(refused.value) and 'remove it' in str(refused.value)


def test_override_limited_cuda_view_warns_h2_and_is_not_compared():
    fields = meminfo(115.2)
    result = assess(fields, cuda=(66571993088, 60 * GIB))
    assert result['cuda_sees_whole_pool'] is False
    assert result['leaked'] is False
    assert any('zz-nvidia-drm-override.conf' in w for w in result['warnings'])


def test_gpu_workload_turns_a_gap_into_a_warning_not_a_leak():
    apps = [{'pid': 4121, 'name': 'python3', 'used_bytes': None}]
    result = assess(meminfo(60.0), gpu_apps=apps)
    assert result['gpu_workload'] is True
    assert result['leaked'] is False
    assert any('python3[4121]' in w and 'stop the serving containers' in w
               for w in result['warnings'])


def test_discrete_gpu_cuda_figures_are_reported_not_compared():
    result = assess(meminfo(115.2), cuda=(85017493504, 10 * GIB), unified=False)
    assert result['cuda_free_gib'] == 10.0
    assert result['cuda_sees_whole_pool'] is None
    assert result['leaked'] is False


def test_threshold_is_a_parameter():
    fields = meminfo(112.0)  # ~4.5 GiB unaccounted
    assert assess(fields, leak_threshold_gib=10)['leaked'] is False
    assert assess(fields, leak_threshold_gib=2)['leaked'] is True
