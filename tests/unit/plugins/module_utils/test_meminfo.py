import pytest

from ansible_collections.gb10.serving.plugins.module_utils.meminfo import (
    MeminfoError,
    parse_meminfo,
    summarize,
)


def read(fixture_path, name):
    with open(fixture_path('proc', name)) as handle:
        return handle.read()


def test_gb10_figures_in_gib(fixture_path):
    summary = summarize(parse_meminfo(read(fixture_path, 'meminfo.gb10-after-load')))
    assert summary == {
        'total_gib': 119.7,
        'available_gib': 11.09,
        'free_gib': 8.79,
        'page_cache_gib': 3.27,
    }


def test_real_capture_parses(fixture_path):
    fields = parse_meminfo(read(fixture_path, 'meminfo.debian-x86_64'))
    assert fields['MemTotal'] > fields['MemAvailable'] > 0
    assert fields['HugePages_Total'] == 0  # unit-less counts stay counts


def test_old_kernel_without_memavailable_falls_back_to_memfree():
    summary = summarize(parse_meminfo('MemTotal: 1048576 kB\nMemFree: 524288 kB\n'))
    assert summary['available_gib'] == 0.5


@pytest.mark.parametrize('text, message', [
    ('', 'no MemTotal'),
    ('MemFree: 10 kB\n', 'no MemTotal'),
    ('MemTotal 10 kB\n', 'line 1'),
    ('MemTotal: lots kB\n', 'non-numeric'),
    ('MemTotal:\n', 'line 1'),
])
def test_malformed_input_is_a_clear_error(text, message):
    with pytest.raises(MeminfoError, match=message):
        parse_meminfo(text)
