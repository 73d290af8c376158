# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CUDA-visible memory, the figure vLLM and SGLang check before loading (rules H2, H4).

On GB10 nvidia-smi and NVML report no memory ("[N/A]"), so the driver API is asked directly:
cuInit, cuDeviceGet, cuCtxCreate, cuMemGetInfo through ctypes, needing nothing but the driver's
libcuda. A probe command (parameter cuda_probe) can replace it; it prints "TOTAL FREE" in bytes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes

LIBCUDA_NAMES = ('libcuda.so.1', 'libcuda.so')


class CudaProbeError(RuntimeError):
    """The CUDA-visible memory could not be read."""


def parse_probe_output(text):
    """"TOTAL FREE" (bytes, whitespace-separated, last non-empty line) -> (total, free)."""
    lines = [line for line in (text or '').splitlines() if line.strip()]
    if not lines:
        raise CudaProbeError('the CUDA probe printed nothing; it must print "TOTAL FREE" in bytes')
    parts = lines[-1].split()
    try:
        total, free = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise CudaProbeError('the CUDA probe printed %r; expected "TOTAL FREE" as two whole '
                             'numbers of bytes' % lines[-1].strip())
    if total <= 0 or free < 0 or free > total:
        raise CudaProbeError('the CUDA probe printed total=%d free=%d: free must be between 0 and '
                             'a positive total' % (total, free))
    return total, free


def _load():
    for name in LIBCUDA_NAMES:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise CudaProbeError('libcuda is not loadable (%s): the NVIDIA driver is not installed on '
                         'this host, or set cuda_probe to a command that prints "TOTAL FREE"'
                         % ', '.join(LIBCUDA_NAMES))


def probe_libcuda(device=0):
    """(total, free) bytes of CUDA-visible memory on one device, through the driver API."""
    cuda = _load()

    def check(status, call):
        if status != 0:
            text = ctypes.c_char_p()
            cuda.cuGetErrorString(status, ctypes.byref(text))
            raise CudaProbeError('%s failed with CUDA error %d (%s)'
                                 % (call, status, (text.value or b'unknown').decode()))

    check(cuda.cuInit(0), 'cuInit')
    dev = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(dev), device), 'cuDeviceGet(%d)' % device)
    ctx = ctypes.c_void_p()
    # The _v2 entry points are the ABI the headers map cuCtxCreate/cuMemGetInfo to since CUDA 4.0.
    check(cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), 'cuCtxCreate')
    try:
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        check(cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), 'cuMemGetInfo')
    finally:
        cuda.cuCtxDestroy_v2(ctx)
    return total.value, free.value
