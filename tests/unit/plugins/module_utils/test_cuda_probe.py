import ctypes

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import cuda_probe
from ansible_collections.gb10.serving.plugins.module_utils.cuda_probe import (
    CudaProbeError,
    parse_probe_output,
)


def test_captured_libcuda_probe_output(fixture_path):
    with open(fixture_path('nvidia-smi', 'nvidia-h100-80gb-hbm3-580.159.04.cuda-probe.busy.txt')) as f:
        total, free = parse_probe_output(f.read())
    assert total == 85017493504
    assert free == 75229691904  # 8.8 GiB lower than idle while a process held 8 GiB


def test_last_line_counts_so_a_chatty_probe_works():
    assert parse_probe_output('loading driver\n128522383360 66571993088\n') == (
        128522383360, 66571993088)


@pytest.mark.parametrize('text, message', [
    ('', 'printed nothing'),
    ('12345\n', 'two whole numbers'),
    ('total free\n', 'two whole numbers'),
    ('100 200\n', 'free must be between 0 and a positive total'),
    ('0 0\n', 'positive total'),
])
def test_bad_probe_output_is_a_clear_error(text, message):
    with pytest.raises(CudaProbeError, match=message):
        parse_probe_output(text)


def test_without_a_driver_the_probe_says_what_to_set(monkeypatch):
    def no_lib(name):
        raise OSError('%s: cannot open shared object file' % name)
    monkeypatch.setattr(ctypes, 'CDLL', no_lib)
    with pytest.raises(CudaProbeError, match='set cuda_probe'):
        cuda_probe.probe_libcuda()


class FakeLibcuda:
    """The driver API calls the probe makes, answering like libcuda with a given status."""

    def __init__(self, fail_at=None):
        self.fail_at = fail_at
        self.calls = []

    def _call(self, name, status_ok=0):
        self.calls.append(name)
        return 100 if name == self.fail_at else status_ok

    def cuInit(self, flags):
        return self._call('cuInit')

    def cuDeviceGet(self, dev, ordinal):
        return self._call('cuDeviceGet')

    def cuCtxCreate_v2(self, ctx, flags, dev):
        return self._call('cuCtxCreate_v2')

    def cuMemGetInfo_v2(self, free, total):
        ctypes.cast(free, ctypes.POINTER(ctypes.c_size_t))[0] = 5 << 30
        ctypes.cast(total, ctypes.POINTER(ctypes.c_size_t))[0] = 8 << 30
        return self._call('cuMemGetInfo_v2')

    def cuCtxDestroy_v2(self, ctx):
        return self._call('cuCtxDestroy_v2')

    def cuGetErrorString(self, status, text):
        ctypes.cast(text, ctypes.POINTER(ctypes.c_char_p))[0] = b'CUDA_ERROR_NO_DEVICE'
        return 0


def test_probe_calls_the_driver_api_in_order_and_destroys_its_context(monkeypatch):
    fake = FakeLibcuda()
    monkeypatch.setattr(cuda_probe, '_load', lambda: fake)
    assert cuda_probe.probe_libcuda() == (8 << 30, 5 << 30)
    assert fake.calls == ['cuInit', 'cuDeviceGet', 'cuCtxCreate_v2', 'cuMemGetInfo_v2',
                          'cuCtxDestroy_v2']


def test_driver_error_is_named(monkeypatch):
    monkeypatch.setattr(cuda_probe, '_load', lambda: FakeLibcuda(fail_at='cuInit'))
    with pytest.raises(CudaProbeError, match=r'cuInit failed with CUDA error 100 \(CUDA_ERROR_NO_DEVICE\)'):
        cuda_probe.probe_libcuda()
