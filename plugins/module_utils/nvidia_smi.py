# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU's own view of memory and processes: nvidia-smi CSV queries, or NVML when importable.

GB10 has no dedicated framebuffer: nvidia-smi prints "[N/A]" for memory.* and "Not Supported"
in its table, and NVML raises NotSupported for the memory info. Those become None here, never a
number, so callers take CUDA-visible memory from a CUDA probe instead (rule H2/H4).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:  # nvidia-ml-py is optional on the node; nvidia-smi answers the same questions
    import pynvml
    HAS_PYNVML = True
except ImportError:
    pynvml = None
    HAS_PYNVML = False

GPU_FIELDS = ('index', 'name', 'uuid', 'driver_version', 'memory.total', 'memory.used',
              'memory.free')
APP_FIELDS = ('pid', 'process_name', 'used_memory')
MEMORY_FIELDS = ('memory.total', 'memory.used', 'memory.free', 'used_memory')
# What nvidia-smi prints where a value does not exist on this GPU (GB10 memory fields, MIG off).
UNAVAILABLE = ('[n/a]', 'n/a', '[not supported]', 'not supported', '[unknown error]',
               '[insufficient permissions]')
NO_PROCESSES = 'no running processes found'
MIB = 1024 * 1024


class NvidiaSmiError(ValueError):
    """nvidia-smi output that does not answer the query that was made."""


def gpu_query_args():
    """Arguments after the nvidia-smi command for the GPU query the parsers expect."""
    return ['--query-gpu=' + ','.join(GPU_FIELDS), '--format=csv,noheader,nounits']


def apps_query_args():
    """Arguments for the compute-apps query the parsers expect."""
    return ['--query-compute-apps=' + ','.join(APP_FIELDS), '--format=csv,noheader,nounits']


def _value(field, raw, lineno):
    raw = raw.strip()
    if raw.lower() in UNAVAILABLE:
        return None
    if field in MEMORY_FIELDS or field in ('index', 'pid'):
        number = raw[:-4].strip() if raw.endswith(' MiB') else raw
        try:
            value = int(number)
        except ValueError:
            raise NvidiaSmiError('line %d: %s is %r, expected a whole number%s; was the query made '
                                 'with --format=csv,noheader,nounits?'
                                 % (lineno, field, raw, ' of MiB' if field in MEMORY_FIELDS else ''))
        return value * MIB if field in MEMORY_FIELDS else value
    return raw


def _rows(text, fields, what):
    rows = []
    for lineno, line in enumerate((text or '').splitlines(), 1):
        if not line.strip():
            continue
        if line.strip().lower().startswith(NO_PROCESSES):
            continue
        cells = [cell.strip() for cell in line.split(',')]
        if len(cells) != len(fields):
            raise NvidiaSmiError('%s line %d has %d comma-separated values, the query asked for %d '
                                 '(%s): %r' % (what, lineno, len(cells), len(fields),
                                               ','.join(fields), line.strip()))
        if cells[0] == fields[0]:  # "index, name, ..." or "pid, ...": a header line
            raise NvidiaSmiError('%s line %d is a CSV header: query with --format=csv,noheader,'
                                 'nounits' % (what, lineno))
        rows.append(dict((field, _value(field, cell, lineno)) for field, cell in zip(fields, cells)))
    return rows


def parse_gpus(text):
    """GPU query output -> list of dicts (memory in bytes or None where not reported).

    Raises NvidiaSmiError on empty output (no GPU answered), wrong column counts or non-numeric
    memory; nvidia-smi's own error text (driver not loaded) lands in the message.
    """
    if not (text or '').strip():
        raise NvidiaSmiError('nvidia-smi printed nothing for the GPU query: no GPU answered')
    gpus = []
    for row in _rows(text, GPU_FIELDS, 'GPU query'):
        gpus.append({
            'index': row['index'],
            'name': row['name'],
            'uuid': row['uuid'],
            'driver_version': row['driver_version'],
            'memory_total_bytes': row['memory.total'],
            'memory_used_bytes': row['memory.used'],
            'memory_free_bytes': row['memory.free'],
        })
    return gpus


def parse_apps(text):
    """Compute-apps query output -> list of {pid, name, used_bytes or None}; empty -> []."""
    return [{'pid': row['pid'], 'name': row['process_name'], 'used_bytes': row['used_memory']}
            for row in _rows(text, APP_FIELDS, 'compute-apps query')]


def _text(value):
    return value.decode('utf-8', 'replace') if isinstance(value, bytes) else str(value)


def nvml_query():
    """(gpus, apps) through NVML, in the shapes parse_gpus/parse_apps return.

    Raises NvidiaSmiError when NVML cannot start (no driver); memory the GPU does not report
    (GB10: NVML_ERROR_NOT_SUPPORTED) is None, as with nvidia-smi's "[N/A]".
    """
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvidiaSmiError('NVML did not start: %s' % exc)
    try:
        version = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus, apps = [], []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            try:
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
                total, used, free = mem.total, mem.used, mem.free
            except pynvml.NVMLError:
                total = used = free = None
            gpus.append({'index': index, 'name': _text(pynvml.nvmlDeviceGetName(handle)),
                         'uuid': _text(pynvml.nvmlDeviceGetUUID(handle)),
                         'driver_version': version, 'memory_total_bytes': total,
                         'memory_used_bytes': used, 'memory_free_bytes': free})
            try:
                procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except pynvml.NVMLError:
                procs = []
            for proc in procs:
                try:
                    name = _text(pynvml.nvmlSystemGetProcessName(proc.pid))
                except pynvml.NVMLError:
                    name = ''
                used = getattr(proc, 'usedGpuMemory', None)
                apps.append({'pid': proc.pid, 'name': name, 'used_bytes': used})
        return gpus, apps
    finally:
        pynvml.nvmlShutdown()
