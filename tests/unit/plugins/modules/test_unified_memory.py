import pytest
import json
import os
import stat

from ansible_collections.gb10.serving.plugins.module_utils import unified_memory as reading
from ansible_collections.gb10.serving.plugins.modules import unified_memory

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H4")

H100 = 'nvidia-h100-80gb-hbm3-580.159.04.'


def replay_smi(tmp_path, fixture_path, gpu, apps, rc=0):
    """An nvidia-smi stand-in that prints captured output for the module's two queries."""
    script = tmp_path / 'nvidia-smi'
    script.write_text('#!/bin/sh\ncase "$1" in\n  --query-gpu=*) cat %s ;;\n'
                      '  --query-compute-apps=*) cat %s ;;\nesac\nexit %d\n'
                      % (fixture_path('nvidia-smi', gpu), fixture_path('nvidia-smi', apps), rc))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def proc_root(tmp_path, fixture_path, meminfo):
    root = tmp_path / 'proc'
    root.mkdir()
    (root / 'meminfo').write_text(open(fixture_path(*meminfo)).read())
    return str(root)


def probe_cmd(tmp_path, text):
    script = tmp_path / 'probe'
    script.write_text('#!/bin/sh\necho "%s"\n' % text)
    script.chmod(0o755)
    return str(script)


def test_captured_h100_busy_matches_what_the_module_returned_on_the_device(
        run_module, tmp_path, fixture_path):
    smi = replay_smi(tmp_path, fixture_path, H100 + 'query-gpu.busy.csv',
                     H100 + 'query-compute-apps.busy.csv')
    with open(fixture_path('nvidia-smi', H100 + 'cuda-probe.busy.txt')) as f:
        probe = probe_cmd(tmp_path, f.read().strip())
    root = proc_root(tmp_path, fixture_path, ('nvidia-smi', H100 + 'meminfo'))
    failed, result = run_module(unified_memory.main, {
        'proc_root': root, 'nvidia_smi': smi, 'gpu_source': 'nvidia_smi', 'cuda_probe': probe})
    assert not failed, result
    with open(fixture_path('nvidia-smi', H100 + 'module-busy-nvidia-smi.json')) as f:
        on_device = json.load(f)
    for key in ('gpus', 'driver_version', 'unified', 'gpu_workload', 'cuda_total_gib',
                'cuda_free_gib', 'total_gib'):
        assert result[key] == on_device[key], key
    assert result['gpu_processes'][0]['used_gib'] == 8.6
    assert result['gpu_processes'][0]['rss_gib'] is None  # pid 456 is not in this proc root


def test_gb10_leak_through_shaped_output(run_module, tmp_path, fixture_path):
    smi = replay_smi(tmp_path, fixture_path, 'gb10-580.142.query-gpu.csv',
                     'gb10-580.142.query-compute-apps.idle.csv')
    root = tmp_path / 'proc'
    root.mkdir()
    (root / 'meminfo').write_text(
        'MemTotal: 125510140 kB\nMemFree: 85000000 kB\nMemAvailable: 86000000 kB\n'
        'Cached: 400000 kB\nAnonPages: 3145728 kB\nShmem: 51200 kB\nSUnreclaim: 307200 kB\n')
    failed, result = run_module(unified_memory.main, {
        'proc_root': str(root), 'nvidia_smi': smi, 'gpu_source': 'nvidia_smi',
        'cuda_probe': 'none'})
    assert not failed
    assert result['unified'] is True
    assert result['leaked'] is True
    assert result['cuda_source'] == 'none'
    assert result['changed'] is False


def test_gpu_processes_get_their_rss_from_proc(run_module, tmp_path, fixture_path):
    smi = replay_smi(tmp_path, fixture_path, 'gb10-580.142.query-gpu.csv',
                     'gb10-580.142.query-compute-apps.busy.csv')
    root = proc_root(tmp_path, fixture_path, ('proc', 'meminfo.gb10-after-load'))
    os.makedirs(os.path.join(root, '4121'))
    with open(os.path.join(root, '4121', 'status'), 'w') as f:
        f.write('Name:\tpython3\nVmRSS:\t64172032 kB\n')
    failed, result = run_module(unified_memory.main, {
        'proc_root': root, 'nvidia_smi': smi, 'gpu_source': 'nvidia_smi', 'cuda_probe': 'none'},
        check_mode=True)
    assert not failed
    assert result['gpu_processes'][0] == {'pid': 4121, 'name': '/usr/bin/python3',
                                          'used_gib': None, 'rss_gib': 61.2}
    assert result['gpu_workload'] is True and result['leaked'] is False


def test_nvidia_smi_failure_names_the_variable(run_module, tmp_path, fixture_path):
    smi = replay_smi(tmp_path, fixture_path, 'malformed.driver-not-loaded.txt',
                     'malformed.driver-not-loaded.txt', rc=9)
    root = proc_root(tmp_path, fixture_path, ('proc', 'meminfo.gb10-after-load'))
    failed, result = run_module(unified_memory.main, {
        'proc_root': root, 'nvidia_smi': smi, 'gpu_source': 'nvidia_smi'})
    assert failed
    assert 'rc=9' in result['msg'] and 'gb10_nvidia_smi' in result['msg']
    assert "couldn't communicate with the NVIDIA driver" in result['msg']


def test_missing_nvidia_smi_is_a_clear_error(run_module, tmp_path, fixture_path):
    root = proc_root(tmp_path, fixture_path, ('proc', 'meminfo.gb10-after-load'))
    failed, result = run_module(unified_memory.main, {
        'proc_root': root, 'nvidia_smi': str(tmp_path / 'no-such-smi'), 'gpu_source': 'nvidia_smi'})
    assert failed and 'gb10_nvidia_smi' in result['msg']


def test_malformed_probe_output_names_the_variable(run_module, tmp_path, fixture_path):
    smi = replay_smi(tmp_path, fixture_path, 'gb10-580.142.query-gpu.csv',
                     'gb10-580.142.query-compute-apps.idle.csv')
    root = proc_root(tmp_path, fixture_path, ('proc', 'meminfo.gb10-after-load'))
    failed, result = run_module(unified_memory.main, {
        'proc_root': root, 'nvidia_smi': smi, 'gpu_source': 'nvidia_smi',
        'cuda_probe': probe_cmd(tmp_path, 'CUDA not ready')})
    assert failed
    assert 'gb10_cuda_probe' in result['msg'] and 'TOTAL FREE' in result['msg']


def test_missing_meminfo_names_the_variable(run_module, tmp_path):
    failed, result = run_module(unified_memory.main, {'proc_root': str(tmp_path)})
    assert failed and 'gb10_proc_root' in result['msg']


def test_nonpositive_threshold_is_refused(run_module, tmp_path):
    failed, result = run_module(unified_memory.main, {'proc_root': str(tmp_path),
                                                      'leak_threshold_gib': 0})
    assert failed and 'leak_threshold_gib' in result['msg']


def test_nvml_requested_without_pynvml_says_so(run_module, tmp_path, fixture_path, monkeypatch):
    monkeypatch.setattr(reading, 'HAS_PYNVML', False)
    root = proc_root(tmp_path, fixture_path, ('proc', 'meminfo.gb10-after-load'))
    failed, result = run_module(unified_memory.main, {'proc_root': root, 'gpu_source': 'nvml'})
    assert failed and 'nvidia-ml-py' in result['msg']


def clean_gb10(tmp_path, fixture_path, cuda_offset_gib):
    """A clean GB10 node's sources: idle GPU, meminfo, and a CUDA probe whose free figure sits
    cuda_offset_gib below MemFree (0 on a clean GB10: unslothai/unsloth PR 10704)."""
    smi = replay_smi(tmp_path, fixture_path, 'gb10-580.142.query-gpu.csv',
                     'gb10-580.142.query-compute-apps.idle.csv')
    root = tmp_path / 'proc'
    root.mkdir()
    free_kb = 119000000
    (root / 'meminfo').write_text(
        'MemTotal: 125510140 kB\nMemFree: %d kB\nMemAvailable: 120600000 kB\n'
        'Cached: 1500000 kB\nAnonPages: 3145728 kB\nShmem: 51200 kB\nSUnreclaim: 307200 kB\n' % free_kb)
    probe = probe_cmd(tmp_path, '%d %d' % (125510140 * 1024, free_kb * 1024 - cuda_offset_gib * 1024 ** 3))
    return {'proc_root': str(root), 'nvidia_smi': smi, 'gpu_source': 'nvidia_smi', 'cuda_probe': probe,
            'baseline_file': str(tmp_path / 'memory' / 'baseline.json')}


def test_the_first_clean_reading_becomes_the_baseline_with_check_mode_and_diff(run_module, tmp_path, fixture_path):
    args = dict(clean_gb10(tmp_path, fixture_path, cuda_offset_gib=0.5), record_baseline='if_missing')
    baseline = args['baseline_file']

    failed, planned = run_module(unified_memory.main, args, check_mode=True)
    assert not failed, planned
    assert planned['changed'] and planned['baseline_recorded'] and not os.path.exists(baseline)
    assert planned['diff']['before'] == '' and '"cuda_offset_gib": 0.5' in planned['diff']['after']

    failed, recorded = run_module(unified_memory.main, args)
    assert not failed and recorded['changed'], recorded
    assert recorded['leaked'] is False and recorded['healthy_offset_source'] == 'field'
    with open(baseline) as handle:
        assert json.load(handle)['cuda_offset_gib'] == 0.5

    failed, again = run_module(unified_memory.main, args)
    assert not failed and not again['changed'] and not again['baseline_recorded']
    assert again['healthy_offset_source'] == 'baseline' and again['baseline']['cuda_offset_gib'] == 0.5


def test_a_leak_beyond_the_baseline_is_found_and_never_recorded(run_module, tmp_path, fixture_path):
    args = clean_gb10(tmp_path, fixture_path, cuda_offset_gib=0.5 + 33)
    os.makedirs(os.path.dirname(args['baseline_file']))
    with open(args['baseline_file'], 'w') as handle:
        json.dump({'cuda_offset_gib': 0.5, 'recorded_at': '2026-12-02T10:00:00Z', 'reason': 'test'}, handle)

    failed, result = run_module(unified_memory.main, dict(args, record_baseline='replace'))

    assert not failed, result
    assert result['leaked'] is True and result['unaccounted_basis'] == 'cuda'
    assert 32.9 < result['unaccounted_gib'] < 33.1
    assert not result['changed'] and not result['baseline_recorded']
    with open(args['baseline_file']) as handle:
        assert json.load(handle)['cuda_offset_gib'] == 0.5


def test_an_unreadable_baseline_names_the_file_and_the_fix(run_module, tmp_path, fixture_path):
    args = clean_gb10(tmp_path, fixture_path, cuda_offset_gib=0)
    os.makedirs(os.path.dirname(args['baseline_file']))
    with open(args['baseline_file'], 'w') as handle:
        handle.write('not json')

    failed, result = run_module(unified_memory.main, args)

    assert failed
    assert args['baseline_file'] in result['msg'] and 'remove it' in result['msg']
