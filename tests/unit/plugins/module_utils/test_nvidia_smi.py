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
