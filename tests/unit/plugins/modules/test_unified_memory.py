import json
import os
import stat

from ansible_collections.gb10.serving.plugins.module_utils import unified_memory as reading
from ansible_collections.gb10.serving.plugins.modules import unified_memory

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
