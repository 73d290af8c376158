from ansible_collections.gb10.serving.plugins.module_utils.meminfo import parse_meminfo
import json

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.unified_memory import (
    DEFAULT_LEAK_THRESHOLD_GIB,
    HEALTHY_CUDA_OFFSET_GIB,
    MAX_BASELINE_CUDA_OFFSET_GIB,
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


def meminfo(available_gib, anon_gib=3.0, shmem_kb=51200, sunreclaim_kb=307200, cache_kb=500000, mlocked_kb=0):
    available = int(available_gib * 1048576)
    return parse_meminfo(
        'MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\nBuffers: 20480 kB\n'
        'Cached: %d kB\nAnonPages: %d kB\nShmem: %d kB\nSUnreclaim: %d kB\n'
        'KernelStack: 20480 kB\nPageTables: 61440 kB\nMlocked: %d kB\n'
        % (TOTAL_KB, available - cache_kb, available, cache_kb - 29370, int(anon_gib * 1048576),
           shmem_kb, sunreclaim_kb, mlocked_kb))


def gb10_cuda(fields, offset_gib=HEALTHY_CUDA_OFFSET_GIB, leak_gib=0.0):
    """(total, free) as a GB10's cuMemGetInfo reports them: free is MemFree (unslothai/unsloth PR
    10704), less a planted offset and what leaked."""
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


def test_a_gb10_full_of_page_cache_is_healthy():
    # unslothai/unsloth PR 10704, measured on a GB10 after writing a 60 GB file: cuda_free =
    # MemFree = 41.52 GiB, MemAvailable 115.65, Cached 72.64. The cache is reclaimable, not a leak,
    # and CUDA's low free figure is MemFree's.
    fields = meminfo(115.65, cache_kb=int(72.64 * 1048576))
    result = assess(fields, cuda=gb10_cuda(fields))
    assert result['cuda_free_gib'] == result['free_gib'] < 45, result
    assert result['leaked'] is False and result['cuda_offset_gib'] == 0.0
    assert 72 < result['reclaimable_gib'] < 74, result
    assert result['healthy_offset_source'] == 'field'


def test_locked_pages_are_a_processes_not_a_leak():
    # 20 GiB of file pages locked with mlock: in use, not available, in neither AnonPages nor Shmem.
    fields = meminfo(95.0, mlocked_kb=20 * 1048576)
    result = assess(fields, cuda=gb10_cuda(fields))
    assert result['leaked'] is False and result['locked_gib'] == 20.0
    assert result['unaccounted_gib'] < 2, result
    # Without the lock counted the same figures read as a 20 GiB leak.
    unlocked = meminfo(95.0)
    assert assess(unlocked, cuda=gb10_cuda(unlocked))['leaked'] is True


def test_a_running_engines_hold_is_named_apart_from_a_leak():
    # A live engine at 0.82 of the pool holds ~98 GiB that no counter owns (its GPU process runs).
    apps = [{'pid': 900, 'name': 'ray::RayWorkerWrapper', 'used_bytes': None}]
    fields = meminfo(17.0)
    result = assess(fields, gpu_apps=apps, cuda=gb10_cuda(fields))
    assert result['leaked'] is False and result['leak_gib'] == 0.0
    assert 97 < result['gpu_held_gib'] < 99.5, result
    gone = assess(fields, cuda=gb10_cuda(fields))
    assert gone['leaked'] is True and gone['leak_gib'] == gone['unaccounted_gib'] and gone['gpu_held_gib'] == 0.0


def test_a_cuda_only_leak_under_twenty_gib_is_found_without_a_baseline():
    # Judged against the 9.5 GiB the field's reading was once taken for, a 15 GiB leak seen only by
    # CUDA passed; a clean GB10's MemFree - CUDA free is 0.
    fields = meminfo(115.2)
    result = assess(fields, cuda=gb10_cuda(fields, leak_gib=15.0))
    assert result['leaked'] is True and result['unaccounted_basis'] == 'cuda'


def test_a_baseline_cannot_swallow_a_leak():
    fields = meminfo(115.2)
    # A baseline file that holds 14 GiB (recorded by an earlier reading, or planted): judged with at
    # most what a clean GB10 shows, a 12 GiB CUDA-only gap is still a leak.
    leak = gb10_cuda(fields, leak_gib=12.0)
    judged = assess(fields, cuda=leak, baseline={'cuda_offset_gib': 14.0})
    assert judged['leaked'] is True and judged['healthy_cuda_offset_gib'] == MAX_BASELINE_CUDA_OFFSET_GIB
    # A small baseline is the node's own clean offset: its gap is not counted twice.
    small = assess(fields, cuda=gb10_cuda(fields, offset_gib=0.8), baseline={'cuda_offset_gib': 0.8})
    assert small['unaccounted_gib'] < 1.5 and small['healthy_offset_source'] == 'baseline'


def reading(fields, cuda, baseline=None, apps=None):
    return assess(fields, gpu_apps=apps, cuda=cuda, baseline=baseline)


def test_only_a_clean_reading_becomes_the_baseline():
    fields = meminfo(115.2)
    clean = reading(fields, gb10_cuda(fields, offset_gib=0.3))
    record = baseline_to_record(clean, 'if_missing', 'first clean measurement', now=0)
    assert dict((k, v) for k, v in record.items() if k != 'reading') == {
        'cuda_offset_gib': 0.3, 'recorded_at': '1970-01-01T00:00:00Z', 'reason': 'first clean measurement'}
    # The clean reading itself is kept: the node without an engine, as the report gives it.
    assert record['reading'] == dict((k, clean[k]) for k in (
        'total_gib', 'available_gib', 'free_gib', 'reclaimable_gib', 'cuda_total_gib', 'cuda_free_gib'))
    assert record['reading']['cuda_free_gib'] == clean['cuda_free_gib'] < record['reading']['free_gib']
    assert baseline_to_record(clean, 'never', '') is None
    # A node that leaked before the collection first saw it: its leak is not its normal.
    leaked = reading(fields, gb10_cuda(fields, leak_gib=33.0))
    assert baseline_to_record(leaked, 'replace', 'after a reboot') is None
    # Nor is a gap under the threshold that a clean GB10 does not show (6 GiB held at first contact).
    held = reading(fields, gb10_cuda(fields, leak_gib=6.0))
    assert held['leaked'] is False and baseline_to_record(held, 'if_missing', '') is None
    # A GPU process runs: its memory may be in the figure.
    busy = reading(fields, gb10_cuda(fields), apps=[{'pid': 7, 'name': 'python3', 'used_bytes': None}])
    assert baseline_to_record(busy, 'if_missing', '') is None
    # No whole-pool CUDA view (the modprobe override, H2): nothing to record.
    capped = reading(fields, (66571993088, 50 * GIB))
    assert baseline_to_record(capped, 'replace', '') is None
    # if_missing keeps a baseline that is there; replace writes over it.
    known = reading(fields, gb10_cuda(fields, offset_gib=0.4), baseline={'cuda_offset_gib': 0.2})
    assert baseline_to_record(known, 'if_missing', '') is None
    assert baseline_to_record(known, 'replace', 'after a reboot')['cuda_offset_gib'] == 0.4
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
