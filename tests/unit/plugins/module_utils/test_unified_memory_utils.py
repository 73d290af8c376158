from ansible_collections.gb10.serving.plugins.module_utils.meminfo import parse_meminfo
from ansible_collections.gb10.serving.plugins.module_utils.unified_memory import (
    DEFAULT_LEAK_THRESHOLD_GIB,
    assess,
)

GIB = 1024 ** 3
KIB = 1024
TOTAL_KB = 125510140  # 119.7 GiB, a Spark


def meminfo(available_gib, anon_gib=3.0, shmem_kb=51200, sunreclaim_kb=307200):
    available = int(available_gib * 1048576)
    return parse_meminfo(
        'MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\nBuffers: 20480 kB\n'
        'Cached: 470630 kB\nAnonPages: %d kB\nShmem: %d kB\nSUnreclaim: %d kB\n'
        'KernelStack: 20480 kB\nPageTables: 61440 kB\n'
        % (TOTAL_KB, available - 500000, available, int(anon_gib * 1048576), shmem_kb,
           sunreclaim_kb))


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
    cuda = (TOTAL_KB * KIB, int(82.0 * GIB))
    result = assess(fields, cuda=cuda)
    assert result['unaccounted_basis'] == 'cuda'
    assert 33 < result['unaccounted_gib'] < 33.5
    assert result['leaked'] is True
    assert result['cuda_sees_whole_pool'] is True


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
