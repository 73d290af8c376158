"""The GB10 fixture kit (tests/fixtures/gb10-sim) as the simulated cluster and molecule use it:
installed into a scratch root, read by the real unified_memory module."""
import argparse
import os
import shutil
import socket
import subprocess
import time

import pytest

from ansible_collections.gb10.serving.plugins.modules import unified_memory

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H4")

SPARK_POOL = 128522383360  # 119.7 GiB
OVERRIDE_POOL = 66571993088  # ~62 GB


@pytest.fixture
def kit(tmp_path, fixture_path, monkeypatch):
    root = tmp_path / 'host'
    subprocess.run(['sh', fixture_path('gb10-sim', 'install.sh'), str(root)], check=True,
                   capture_output=True)
    monkeypatch.setenv('GB10_SIM_ROOT', str(root))
    monkeypatch.setenv('GB10_SIM_KIT', str(root / 'opt' / 'gb10-sim'))
    # the CI machine's own processes (a simulated cluster's vLLM, say) are not this node's
    (tmp_path / 'proc').mkdir()
    monkeypatch.setenv('GB10_SIM_PROC', str(tmp_path / 'proc'))

    class Kit:
        path = root

        def run(self, *argv):
            cmd = [str(root / 'opt' / 'gb10-sim' / 'bin' / argv[0])] + list(argv[1:])
            if argv[0] == 'gb10-test-boot':
                cmd[0] = str(root / 'usr' / 'local' / 'sbin' / 'gb10-test-boot')
            return subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy(),
                                  check=False)  # callers assert on the return code

        def args(self, **extra):
            args = {'proc_root': str(root / 'var' / 'lib' / 'gb10-sim' / 'proc'),
                    'nvidia_smi': str(root / 'opt' / 'gb10-sim' / 'bin' / 'nvidia-smi'),
                    'gpu_source': 'nvidia_smi',
                    'cuda_probe': str(root / 'opt' / 'gb10-sim' / 'bin' / 'gb10-cuda-probe'),
                    'baseline_file': str(root / 'var' / 'lib' / 'gb10' / 'memory' / 'baseline.json')}
            args.update(extra)
            return args

    return Kit()


def probe(kit):
    out = kit.run('gb10-cuda-probe')
    assert out.returncode == 0, out.stderr
    total, free = (int(x) for x in out.stdout.split())
    return total, free


def test_fresh_node_is_a_healthy_spark(kit, run_module):
    failed, result = run_module(unified_memory.main, kit.args())
    assert not failed, result
    assert result['total_gib'] == 119.7
    assert result['unified'] is True
    assert result['driver_version'] == '580.142'
    assert result['leaked'] is False
    assert result['unaccounted_gib'] < 1


def state(kit):
    text = (kit.path / 'var' / 'lib' / 'gb10-sim' / 'state').read_text()
    return dict(line.split('=', 1) for line in text.split())


def test_cuda_free_is_memfree_and_a_clean_node_looks_like_the_measured_gb10(kit, run_module):
    # unslothai/unsloth PR 10704 on a GB10, clean: cuda_free = MemFree = 103.25, MemAvailable 115.85,
    # Cached 12.64 (lib.sh cites it). The kit's pool is 119.7 GiB, the field's 121.69 in CUDA's count.
    failed, result = run_module(unified_memory.main, kit.args())
    assert not failed, result
    assert result['cuda_offset_gib'] == 0.0 and result['cuda_free_gib'] == result['free_gib']
    assert 102 < result['cuda_free_gib'] < 104 and 115 < result['available_gib'] < 116.5, result
    assert result['leaked'] is False


def test_what_the_node_writes_lowers_cuda_free_and_a_drop_leaves_its_floor(kit, run_module):
    # A 60 GiB write (the same PR: Cached 12.64 -> 72.64): MemFree and CUDA free fall by what went
    # into the cache, MemAvailable does not move; nothing is leaked.
    before = run_module(unified_memory.main, kit.args())[1]
    assert kit.run('gb10-sim-set', 'cache_gib=72.6').returncode == 0
    full = run_module(unified_memory.main, kit.args())[1]
    assert round(before['cuda_free_gib'] - full['cuda_free_gib']) == 60 and full['cuda_free_gib'] == full['free_gib']
    assert full['available_gib'] == before['available_gib'], full
    assert full['leaked'] is False
    # A drop (echo 3 > drop_caches) leaves what the field measured with caches dropped (~9.5 GiB).
    out = subprocess.run(['sh', '-c', '. "$GB10_SIM_KIT/lib.sh" && sim_drop_cache'], capture_output=True,
                         text=True, check=False)
    assert out.returncode == 0, out.stderr
    dropped = run_module(unified_memory.main, kit.args())[1]
    assert 9 < dropped['reclaimable_gib'] < 10.5 and dropped['cuda_free_gib'] > before['cuda_free_gib'], dropped


def test_locked_pages_are_in_use_and_not_a_leak(kit, run_module):
    assert kit.run('gb10-sim-set', 'locked_gib=25').returncode == 0
    failed, result = run_module(unified_memory.main, kit.args())
    assert not failed and result['locked_gib'] == 25.0 and result['leaked'] is False, result
    assert result['available_gib'] < 91


def test_planted_leak_is_detected_and_a_reboot_frees_it(kit, run_module):
    assert kit.run('gb10-plant-leak', '33').returncode == 0
    failed, result = run_module(unified_memory.main, kit.args())
    assert result['leaked'] is True
    assert 33 <= result['unaccounted_gib'] < 34
    assert kit.run('gb10-test-boot').returncode == 0
    failed, result = run_module(unified_memory.main, kit.args())
    assert result['leaked'] is False


def test_persistent_leak_survives_a_reboot(kit, run_module):
    kit.run('gb10-plant-leak', '40', '--persist')
    kit.run('gb10-test-boot')
    failed, result = run_module(unified_memory.main, kit.args())
    assert result['leaked'] is True


def test_override_file_at_boot_caps_cuda_at_62_gb(kit, run_module):
    assert probe(kit)[0] == SPARK_POOL
    conf = kit.path / 'etc' / 'modprobe.d' / 'zz-nvidia-drm-override.conf'
    conf.parent.mkdir(parents=True)
    conf.write_text('options nvidia-drm modeset=1\n')
    assert probe(kit)[0] == SPARK_POOL  # only a boot reads it
    kit.run('gb10-test-boot')
    total, free = probe(kit)
    assert total == OVERRIDE_POOL and free <= total
    failed, result = run_module(unified_memory.main, kit.args())
    assert result['cuda_sees_whole_pool'] is False
    conf.unlink()
    kit.run('gb10-test-boot')
    assert probe(kit)[0] == SPARK_POOL


def test_fake_nvidia_smi_answers_like_gb10(kit, fixture_path):
    out = kit.run('nvidia-smi', '--query-gpu=driver_version,memory.total', '--format=csv,noheader')
    assert out.stdout == '580.142, [N/A]\n'
    assert 'Not Supported' in kit.run('nvidia-smi').stdout
    bad = kit.run('nvidia-smi', '--query-gpu=memory.bogus', '--format=csv,noheader')
    with open(fixture_path('nvidia-smi', 'nvidia-h100-80gb-hbm3-580.159.04.invalid-field.txt')) as f:
        assert bad.stdout.strip() == f.read().splitlines()[0].strip()  # same words as the real one
    assert bad.returncode == 2


def test_set_changes_driver_and_services(kit, run_module):
    kit.run('gb10-sim-set', 'driver_version=590.44.01', 'services_gib=19')
    failed, result = run_module(unified_memory.main, kit.args())
    assert result['driver_version'] == '590.44.01'
    assert result['processes_gib'] > 19
    assert result['leaked'] is False  # services are processes, not a leak
    assert kit.run('gb10-sim-set', 'nonsense=1').returncode == 2


def test_plant_leak_rejects_a_non_number(kit):
    out = kit.run('gb10-plant-leak', 'lots')
    assert out.returncode == 2 and 'usage' in out.stderr


def test_running_vllm_is_a_gpu_workload_not_a_leak(kit, run_module, tmp_path):
    engine = tmp_path / 'proc' / '4121'
    engine.mkdir()
    # `vllm serve` as the kernel runs its script: the interpreter, the script, then its arguments.
    (engine / 'cmdline').write_bytes(b'/opt/vllm/bin/python3\0/opt/vllm/bin/vllm\0serve\0/models/m\0')
    core = tmp_path / 'proc' / '4122'
    core.mkdir()
    (core / 'cmdline').write_bytes(b'VLLM::EngineCore\0')  # its engine core, by process title
    rank = tmp_path / 'proc' / '4123'
    rank.mkdir()
    (rank / 'cmdline').write_bytes(b'ray::RayWorkerProc.run\0')  # a worker's rank under vLLM 0.32
    kit.run('gb10-plant-leak', '60')  # the engine's memory looks the same as a leak
    failed, result = run_module(unified_memory.main, kit.args())
    assert result['gpu_workload'] is True
    assert sorted(app['pid'] for app in result['gpu_processes']) == [4121, 4122, 4123]
    assert result['leaked'] is False


@pytest.mark.rule("H10")
def test_a_program_that_only_names_the_engine_is_no_gpu_workload(kit, run_module, tmp_path):
    # earlyoom (rule H10) names the engine's processes in its arguments; a driver lists its clients,
    # not the programs that mention them, so a leak beside it is still a leak.
    guard = tmp_path / 'proc' / '737'
    guard.mkdir()
    (guard / 'cmdline').write_bytes(b'\0'.join([b'/usr/bin/earlyoom', b'-m', b'4', b'--prefer', b'^(vllm|VLLM::.*|ray::.*)$']))
    kit.run('gb10-plant-leak', '60')
    failed, result = run_module(unified_memory.main, kit.args())
    assert result['gpu_workload'] is False
    assert result['leaked'] is True


# ---- gb10-gpu-ledger: a rank's memory leaks when its container dies under it (rule H4) ----------

# Made-up pids above any real pid_max, in the scratch /proc: a containerd shim and its container's init.
SHIM = 4000001
INIT = 4000002


def fake_process(proc, pid, ppid, comm, state='S', flags=0):
    """/proc/PID/{stat,comm} as the ledger reads them: state, ppid, flags (field 9), start time."""
    (proc / str(pid)).mkdir(exist_ok=True)
    (proc / str(pid) / 'comm').write_text(comm + '\n')
    fields = [state, str(ppid), '0', '0', '0', '-1', str(flags)] + ['0'] * 12 + ['4242']
    (proc / str(pid) / 'stat').write_text('%d (%s) %s\n' % (pid, comm, ' '.join(fields)))


def leak_gib(kit):
    state = (kit.path / 'var' / 'lib' / 'gb10-sim' / 'state').read_text()
    return float(dict(line.split('=', 1) for line in state.split())['leak_gib'])


@pytest.fixture
def ledger(kit, tmp_path, monkeypatch):
    """The kit's ledger on an abstract socket of this test; the connecting test process sits in a
    made-up container: test -> INIT (the container's init) -> SHIM (containerd-shim)."""
    proc = tmp_path / 'proc'
    me = os.getpid()
    fake_process(proc, me, INIT, 'python3')
    fake_process(proc, INIT, SHIM, 'ray')
    fake_process(proc, SHIM, 1, 'containerd-shim')
    name = 'gb10-sim-ledger-test-%d-%s' % (me, tmp_path.name)
    monkeypatch.setenv('GB10_SIM_LEDGER', name)
    log = open(str(tmp_path / 'ledger.log'), 'w')
    server = subprocess.Popen([str(kit.path / 'opt' / 'gb10-sim' / 'bin' / 'gb10-gpu-ledger')],
                              stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())

    def hold():
        for unused_try in range(100):  # bounded: 10 s for the ledger to listen
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect('\0' + name)
                break
            except OSError:
                conn.close()
                time.sleep(0.1)
        else:
            raise AssertionError((tmp_path / 'ledger.log').read_text())
        conn.sendall(b'hold 0.82\n')  # what the serving image's rank says (gb10_sim_platform/gpu_ledger.py)
        wait_for(lambda: 'hold: pid %d (container init %d)' % (me, INIT) in (tmp_path / 'ledger.log').read_text())
        return conn

    def ended():
        return wait_for(lambda: ('freed' in (tmp_path / 'ledger.log').read_text()
                                 or 'LEAK' in (tmp_path / 'ledger.log').read_text()))

    yield argparse.Namespace(hold=hold, ended=ended, proc=proc, log=tmp_path / 'ledger.log')
    server.kill()
    server.wait()
    log.close()


def wait_for(check):
    for unused_try in range(100):  # bounded: 10 s
        if check():
            return True
        time.sleep(0.1)
    return False


def test_a_live_rank_holds_its_share_and_a_rank_that_ends_in_its_running_container_frees_it(kit, ledger, run_module):
    conn = ledger.hold()
    # vLLM at 0.82 preallocates that share of what CUDA reports (the pool) and holds it while it lives.
    assert wait_for(lambda: float(state(kit)['engine_gib']) > 0), ledger.log.read_text()
    assert abs(float(state(kit)['engine_gib']) - 0.82 * 119.7) < 0.1, state(kit)
    failed, serving = run_module(unified_memory.main, kit.args())
    assert not failed and serving['available_gib'] < 20 and serving['free_gib'] < 20, serving
    conn.close()  # the rank ends (a graceful engine stop); its container's init still runs

    assert ledger.ended(), ledger.log.read_text()
    assert 'freed' in ledger.log.read_text()
    assert leak_gib(kit) == 0
    assert wait_for(lambda: float(state(kit)['engine_gib']) == 0), state(kit)
    failed, result = run_module(unified_memory.main, kit.args())
    assert not failed and not result['leaked'] and result['available_gib'] > 110, result


def test_a_write_to_the_kits_drop_caches_drops_the_simulated_cache(kit, ledger):
    kit.run('gb10-sim-set', 'cache_gib=70')
    control = kit.path / 'var' / 'lib' / 'gb10-sim' / 'proc' / 'sys' / 'vm' / 'drop_caches'
    control.write_text('3\n')
    assert wait_for(lambda: float(state(kit)['cache_gib']) == 9.5), (state(kit), ledger.log.read_text())
    assert control.read_text() == ''


@pytest.mark.parametrize('init_state', ['exiting', 'zombie', 'gone'])
def test_a_rank_whose_container_dies_under_it_leaks_until_a_reboot(kit, ledger, run_module, init_state):
    conn = ledger.hold()
    # docker stop (past its timeout) or docker kill: the container's init goes first.
    if init_state == 'gone':
        shutil.rmtree(str(ledger.proc / str(INIT)))
    else:
        fake_process(ledger.proc, INIT, SHIM, 'ray', *{'exiting': ('S', 0x4), 'zombie': ('Z', 0)}[init_state])
    conn.close()

    assert ledger.ended(), ledger.log.read_text()
    assert wait_for(lambda: leak_gib(kit) == 33), ledger.log.read_text()
    assert wait_for(lambda: float(state(kit)['engine_gib']) == 0), state(kit)  # the rest of its share freed
    failed, result = run_module(unified_memory.main, kit.args())
    assert not failed and result['leaked'], result
    kit.run('gb10-test-boot')  # a (simulated) reboot frees it
    failed, result = run_module(unified_memory.main, kit.args())
    assert not failed and not result['leaked']


@pytest.mark.rule("H1")
def test_a_kernel_update_without_modules_boots_a_node_without_its_gpu(kit, run_module):
    # Rule H1: the kit's node runs a kernel with the driver's modules; an update installs
    # a newer kernel that DKMS built nothing for. boot_kernel names it before the reboot; booted
    # anyway, nvidia-smi and the CUDA probe fail as on a Spark without its driver loaded.
    from ansible_collections.gb10.serving.plugins.modules import boot_kernel
    tree = str(kit.path / 'var' / 'lib' / 'gb10-sim' / 'root')
    failed, before = run_module(boot_kernel.main, {'root': tree, 'branch': '580'})
    assert not failed and before['ok'] and before['kernel'] == '6.11.0-1016-nvidia', before
    assert [m['version'] for m in before['modules']] == ['580.142']

    assert kit.run('gb10-sim-kernel', '6.17.0-1008-nvidia', '--no-modules').returncode == 0
    failed, after = run_module(boot_kernel.main, {'root': tree, 'branch': '580'})
    assert not failed and not after['ok'] and after['kernel'] == '6.17.0-1008-nvidia', after

    assert kit.run('gb10-test-boot').returncode == 0  # the reboot the check would have refused
    smi = kit.run('nvidia-smi')
    assert smi.returncode == 9 and "couldn't communicate with the NVIDIA driver" in smi.stdout
    assert kit.run('gb10-cuda-probe').returncode != 0
    failed, memory = run_module(unified_memory.main, kit.args())
    assert failed, memory

    # The fix (the modules built for the new kernel), then a reboot: the GPU is back.
    assert kit.run('gb10-sim-kernel', '6.17.0-1008-nvidia').returncode == 0
    assert kit.run('gb10-test-boot').returncode == 0
    assert kit.run('nvidia-smi').returncode == 0
    assert run_module(boot_kernel.main, {'root': tree, 'branch': '580'})[1]['ok']


# ---- a conformance report as a simulated Spark (playbooks/report.yml, gb10-sim-from-report) -------

def test_the_kit_installs_as_the_field_report_and_takes_a_real_sparks_report(kit, run_module, tmp_path):
    import json
    shipped = json.loads((kit.path / 'opt' / 'gb10-sim' / 'field-report.json').read_text())
    assert all(key in shipped['sources'] for key in ('memory.reclaimable_gib', 'memory.cache_floor_gib'))
    fresh = run_module(unified_memory.main, kit.args())[1]
    assert abs(fresh['reclaimable_gib'] - shipped['nodes']['spark']['memory']['reclaimable_gib']) < 0.2, fresh
    # A report a Spark's owner ran: a poorer node with more cache, a leak and another driver.
    memory = {'total_gib': 119.7, 'processes_gib': 19.0, 'reclaimable_gib': 40.0, 'leak_gib': 33.0}
    # Its P2 ConnectX-7 endpoint negotiated x2 of x4, as an ASUS GX10's does (forums.developer.nvidia.com/t/367853).
    pcie = dict((dev, {'speed': '32.0 GT/s PCIe', 'width': 2 if dev.startswith('roceP2') else 4, 'max_width': 4})
                for dev in ('rocep1s0f0', 'rocep1s0f1', 'roceP2p1s0f0', 'roceP2p1s0f1'))
    report = {'format': 1, 'nodes': {'spark-b': {'memory': memory, 'driver_version': '580.173.02',
                                                 'override_present': False, 'link': {'pcie': pcie}}}}
    path = tmp_path / 'theirs.json'
    path.write_text(json.dumps(report))
    assert kit.run('gb10-sim-from-report', str(path), 'spark-b').returncode == 0
    theirs = run_module(unified_memory.main, kit.args())[1]
    assert theirs['driver_version'] == '580.173.02' and theirs['leaked'] and theirs['processes_gib'] > 19, theirs
    assert 39 < theirs['reclaimable_gib'] < 41, theirs
    state = dict(line.split('=', 1) for line in (kit.path / 'var' / 'lib' / 'gb10-sim' / 'state').read_text().split())
    assert (state['pcie_width_p1'], state['pcie_width_p2']) == ('4', '2'), state
    assert kit.run('gb10-sim-from-report', str(path), 'nobody').returncode == 2


@pytest.mark.rule("H11")
def test_kernel_7_0_0_1019_boots_with_kexec_handover_scratch_as_cma_unless_kho_is_off(kit, run_module):
    # NVIDIA/NV-Kernels PR 591: CmaTotal 0, CmaFree ~9.7 GiB; kho=off leaves none.
    assert kit.run('gb10-sim-kernel', '7.0.0-1019-nvidia').returncode == 0
    assert kit.run('gb10-test-boot').returncode == 0
    assert run_module(unified_memory.main, kit.args())[1]['kho_cma_gib'] == 9.7
    assert kit.run('gb10-sim-set', 'kho_off=1').returncode == 0
    assert kit.run('gb10-test-boot').returncode == 0
    assert run_module(unified_memory.main, kit.args())[1]['kho_cma_gib'] == 0.0


@pytest.mark.rule("H12")
def test_a_gpu_stuck_in_its_low_power_state_clocks_low_under_load_and_a_reboot_keeps_it(kit, tmp_path):
    # eugr/spark-vllm-docker issue 334: ~702 MHz under inference where a healthy GB10 runs ~2398; an
    # OS reboot kept it. The GPU works while the engine's processes do (the CPU build's kernels).
    def query():
        out = kit.run('nvidia-smi', '--query-gpu=clocks.sm,utilization.gpu', '--format=csv,noheader,nounits')
        assert out.returncode == 0, out.stdout + out.stderr
        return tuple(int(value) for value in out.stdout.split(','))

    assert query() == (2223, 0)
    engine = subprocess.Popen(['bash', '-c', 'exec -a VLLM::EngineCore python3 -c "while True: pass"'])
    try:
        os.symlink('/proc/%d' % engine.pid, str(tmp_path / 'proc' / str(engine.pid)))
        time.sleep(0.2)
        clock, utilization = query()
        assert clock == 2398 and utilization > 0, (clock, utilization)
        assert kit.run('gb10-sim-set', 'gpu_clock_stuck=1').returncode == 0
        clock, utilization = query()
        assert clock == 702 and utilization > 0, (clock, utilization)
    finally:
        engine.kill()
        engine.wait()
    os.unlink(str(tmp_path / 'proc' / str(engine.pid)))
    assert query() == (890, 0)
    assert kit.run('gb10-test-boot').returncode == 0
    assert state(kit)['gpu_clock_stuck'] == '1' and query() == (890, 0)


@pytest.mark.rule("H12")
def test_a_clock_lock_caps_the_sm_clock_until_reset_or_the_next_boot(kit):
    # nvidia-smi -lgc 0,2200 locked at boot by a unit: SM 2184-2190 MHz idle under it, against ~2223
    # unlocked (tonyd2wild/DeepSeek-V4.1-Flash-vLLM-DGX-Spark issue 1; nvidia_smi.py's CLOCKS).
    assert kit.run('gb10-test-boot').returncode == 0

    def clock():
        out = kit.run('nvidia-smi', '--query-gpu=clocks.sm', '--format=csv,noheader,nounits')
        assert out.returncode == 0, out.stdout
        return int(out.stdout)

    assert clock() == 2223
    locked = kit.run('nvidia-smi', '-lgc', '0,2000')
    assert locked.returncode == 0 and 'gpuClkMax 2000' in locked.stdout, locked.stdout
    assert clock() == 2000
    assert kit.run('nvidia-smi', '-rgc').returncode == 0 and clock() == 2223
    assert kit.run('nvidia-smi', '--lock-gpu-clocks=0,2100').returncode == 0 and clock() == 2100
    assert kit.run('gb10-test-boot').returncode == 0 and clock() == 2223  # a boot drops the lock
    assert kit.run('nvidia-smi', '-lgc', '2000').returncode == 2
