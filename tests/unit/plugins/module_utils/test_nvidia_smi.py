import pytest

from ansible_collections.gb10.serving.plugins.module_utils.nvidia_smi import (
    MIB,
    NvidiaSmiError,
    apps_query_args,
    gpu_query_args,
    parse_apps,
    parse_gpus,
)

H100 = 'nvidia-h100-80gb-hbm3-580.159.04.'
GB10 = 'gb10-580.142.'


def read(fixture_path, name):
    with open(fixture_path('nvidia-smi', name)) as handle:
        return handle.read()


def test_query_args_ask_for_machine_readable_csv():
    assert gpu_query_args()[-1] == '--format=csv,noheader,nounits'
    assert 'memory.free' in gpu_query_args()[0]
    assert apps_query_args()[0] == '--query-compute-apps=pid,process_name,used_memory'


def test_captured_h100_reports_memory_in_bytes(fixture_path):
    gpu, = parse_gpus(read(fixture_path, H100 + 'query-gpu.csv'))
    assert gpu['name'] == 'NVIDIA H100 80GB HBM3'
    assert gpu['driver_version'] == '580.159.04'
    assert gpu['memory_total_bytes'] == 81559 * MIB
    assert gpu['memory_used_bytes'] == 0
    assert gpu['memory_free_bytes'] == 81079 * MIB


def test_captured_h100_apps_idle_is_empty_and_busy_has_the_process(fixture_path):
    assert parse_apps(read(fixture_path, H100 + 'query-compute-apps.idle.csv')) == []
    assert parse_apps(read(fixture_path, H100 + 'query-compute-apps.busy.csv')) == [
        {'pid': 456, 'name': 'python3', 'used_bytes': 8802 * MIB}]


def test_gb10_memory_fields_are_none_not_numbers(fixture_path):
    gpu, = parse_gpus(read(fixture_path, GB10 + 'query-gpu.csv'))
    assert gpu['name'] == 'NVIDIA GB10'
    assert gpu['memory_total_bytes'] is None
    assert gpu['memory_free_bytes'] is None
    apps = parse_apps(read(fixture_path, GB10 + 'query-compute-apps.busy.csv'))
    assert [app['pid'] for app in apps] == [4121, 4388]
    assert all(app['used_bytes'] is None for app in apps)


@pytest.mark.parametrize('spelling', ['[N/A]', 'N/A', '[Not Supported]', 'Not Supported'])
def test_every_unavailable_spelling_is_none(spelling):
    gpu, = parse_gpus('0, NVIDIA GB10, GPU-x, 580.142, %s, %s, %s\n' % ((spelling,) * 3))
    assert gpu['memory_used_bytes'] is None


def test_no_running_processes_line_means_no_apps():
    assert parse_apps('No running processes found\n') == []


def test_empty_gpu_output_says_no_gpu_answered():
    with pytest.raises(NvidiaSmiError, match='printed nothing'):
        parse_gpus('')


@pytest.mark.parametrize('name, message', [
    ('malformed.driver-not-loaded.txt', "couldn't communicate with the NVIDIA driver"),
    ('malformed.short-row.csv', 'has 4 comma-separated values, the query asked for 7'),
    ('malformed.non-numeric-memory.csv', "memory.total is 'lots'"),
    ('malformed.with-header-and-units.csv', 'CSV header'),
])
def test_malformed_output_gives_a_clear_error(fixture_path, name, message):
    with pytest.raises(NvidiaSmiError) as caught:
        parse_gpus(read(fixture_path, name))
    assert message in str(caught.value)


def test_units_left_in_by_a_query_without_nounits_are_still_read():
    gpu, = parse_gpus('0, NVIDIA H100 80GB HBM3, GPU-x, 580.159.04, 81559 MiB, 0 MiB, 81079 MiB\n')
    assert gpu['memory_total_bytes'] == 81559 * MIB


class FakeNVML:
    """pynvml as a GB10 answers it: memory info NotSupported, one compute process with no usage."""

    class NVMLError(Exception):
        pass

    class Proc:
        pid = 4121
        usedGpuMemory = None

    def __init__(self, start_fails=False):
        self.start_fails = start_fails
        self.shut = False

    def nvmlInit(self):
        if self.start_fails:
            raise self.NVMLError('Driver Not Loaded')

    def nvmlShutdown(self):
        self.shut = True

    def nvmlSystemGetDriverVersion(self):
        return b'580.142'

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetMemoryInfo(self, handle):
        raise self.NVMLError('Not Supported')

    def nvmlDeviceGetName(self, handle):
        return 'NVIDIA GB10'

    def nvmlDeviceGetUUID(self, handle):
        return 'GPU-5e1f0a73-9c2d-4b8e-a61f-2f0c7d3e9b14'

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [self.Proc()]

    def nvmlSystemGetProcessName(self, pid):
        return b'/usr/bin/python3'


def test_nvml_on_gb10_gives_the_same_shapes_as_nvidia_smi(monkeypatch):
    from ansible_collections.gb10.serving.plugins.module_utils import nvidia_smi
    fake = FakeNVML()
    monkeypatch.setattr(nvidia_smi, 'pynvml', fake)
    gpus, apps = nvidia_smi.nvml_query()
    assert gpus == [{'index': 0, 'name': 'NVIDIA GB10',
                     'uuid': 'GPU-5e1f0a73-9c2d-4b8e-a61f-2f0c7d3e9b14', 'driver_version': '580.142',
                     'memory_total_bytes': None, 'memory_used_bytes': None,
                     'memory_free_bytes': None}]
    assert apps == [{'pid': 4121, 'name': '/usr/bin/python3', 'used_bytes': None}]
    assert fake.shut


def test_nvml_without_a_driver_is_a_clear_error(monkeypatch):
    from ansible_collections.gb10.serving.plugins.module_utils import nvidia_smi
    monkeypatch.setattr(nvidia_smi, 'pynvml', FakeNVML(start_fails=True))
    with pytest.raises(NvidiaSmiError, match='NVML did not start: Driver Not Loaded'):
        nvidia_smi.nvml_query()
