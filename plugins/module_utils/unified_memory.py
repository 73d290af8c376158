# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a GB10 node's unified memory went, and whether some of it leaked (rule H4).

A crashed or hard-stopped container can leave tens of GB held by the driver: no process owns it,
nvidia-smi does not show it, drop_caches does not free it. So, with caches dropped and no GPU
workload running, "unaccounted" = memory in use that neither processes (anonymous pages, shared
memory) nor the kernel's own bookkeeping (unreclaimable slab, stacks, page tables) explain. The
field reports also saw the leak only in CUDA's view ("free -g shows plenty of RAM"), so where
CUDA sees the whole pool CUDA's own gap counts too; the larger of the two is reported.

On a GB10, CUDA's free figure (cuMemGetInfo) IS the kernel's MemFree: page cache counts as used.
Measured on a GB10 (unslothai/unsloth PR 10704): clean, cuda_free=103.25 MemFree=103.25
MemAvailable=115.85 GiB; after writing a 60 GB file, cuda_free=41.52 MemFree=41.52
MemAvailable=115.65. So a healthy node's MemFree - CUDA free is ~0, and CUDA's gap is judged
against that: MemFree - CUDA free - the node's clean offset (its own baseline, recorded only when
it is known clean and never above MAX_BASELINE_CUDA_OFFSET_GIB, so a baseline cannot swallow a
leak). The gap between MemAvailable and CUDA free is page cache the kernel reclaims on demand, not
a leak and not a driver offset; vLLM sizes its share from available memory on an integrated GPU for
the same reason (vllm/utils/mem_utils.py, MemorySnapshot.measure).

Three things hold memory on a node without being a leak, and the reading names each apart:
the page cache (``reclaimable_gib``: available but not free), pages locked with mlock (a process
pinned them: ``locked_gib``, counted as the process's) and a live GPU workload's hold
(``gpu_held_gib``: what no counter owns while a GPU process runs; a vLLM engine preallocates
gpu_memory_utilization x the pool at start and holds it until it stops). ``leak_gib`` is the
unaccounted memory only when the verdict says leaked.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shlex
import time

from ansible_collections.gb10.serving.plugins.module_utils.cuda_probe import (
    CudaProbeError,
    parse_probe_output,
    probe_libcuda,
)
from ansible_collections.gb10.serving.plugins.module_utils.meminfo import MeminfoError, parse_meminfo, to_gib
from ansible_collections.gb10.serving.plugins.module_utils.nvidia_smi import (
    HAS_PYNVML,
    NvidiaSmiError,
    apps_query_args,
    gpu_query_args,
    nvml_query,
    parse_apps,
    parse_gpus,
)

# Tens of GB leaked were seen (33 GB per failed run, 90 GB on one node); a healthy node has a
# few GB that no counter explains (firmware carve-outs, driver bookkeeping). 10 GiB sits between.
DEFAULT_LEAK_THRESHOLD_GIB = 10.0
# CUDA's total is "the whole pool" when it is at least this share of MemTotal; with the DGX OS
# modprobe override CUDA sees ~62 of 119.7 GB (rule H2) and its free figure says nothing about
# the rest of the pool.
WHOLE_POOL_SHARE = 0.9
# The clean node's CUDA offset (MemFree - CUDA free): 0 on a GB10 (three readings in
# unslothai/unsloth PR 10704: 0.00, 0.00, 0.00 GiB, with and without 60 GB in the page cache).
HEALTHY_CUDA_OFFSET_GIB = 0.0
# The most a node's own clean baseline may hold: a record above it is taken as this. A clean GB10
# shows 0, so a larger gap at a "clean" moment is memory held, and a baseline that kept it would hide
# a leak of that size from every later reading (1 GiB: the readings' rounding and a driver's few
# hundred MB of bookkeeping, well under the 10 GiB threshold).
MAX_BASELINE_CUDA_OFFSET_GIB = 1.0
# Where the node's clean baseline lives: on the node's disk, so it survives reboots (a reboot is
# when it is recorded), beside the collection's other state (role node_metrics' exporter mounts
# /var/lib/gb10 read-only, so it reads the same file).
DEFAULT_BASELINE_FILE = '/var/lib/gb10/memory/baseline.json'
BASELINE_MODES = ('never', 'if_missing', 'replace')
# What a baseline keeps of the clean reading that made it (meminfo and CUDA's view, GiB).
CLEAN_READING = ('total_gib', 'available_gib', 'free_gib', 'reclaimable_gib', 'cuda_total_gib', 'cuda_free_gib')
KERNEL_FIELDS = ('SUnreclaim', 'KernelStack', 'PageTables', 'SecPageTables')
# Mlocked: pages a process pinned (the engine's containers run with IPC_LOCK). Locked file pages are
# in use and not reclaimable, yet in neither AnonPages nor Shmem; counting every locked page as a
# process's may count a locked anonymous page twice, which errs towards "not leaked" by at most
# what is locked: a node whose memory is only locked is never rebooted.
PROCESS_FIELDS = ('AnonPages', 'Shmem', 'Mlocked')
GIB = 1024.0 ** 3


def assess(fields, gpu_apps=None, cuda=None, leak_threshold_gib=DEFAULT_LEAK_THRESHOLD_GIB,
           unified=True, baseline=None):
    """The module's figures from parsed meminfo (bytes), GPU processes and CUDA (total, free).

    gpu_apps: list of {pid, name, used_bytes or None}; cuda: (total, free) bytes or None;
    unified: the GPU draws on the system pool (GB10: nvidia-smi reports no memory of its own);
    baseline: the node's clean record (read_baseline) or None (the field's offset is used).
    A discrete GPU's CUDA figures describe its own memory and are reported, not compared.
    Returns a dict of GiB figures, the basis of ``unaccounted_gib``, ``leaked`` and a list of
    ``warnings``.
    """
    gpu_apps = gpu_apps or []
    total = fields['MemTotal']
    available = fields.get('MemAvailable', fields.get('MemFree', 0))
    cache = fields.get('Cached', 0) + fields.get('Buffers', 0)
    processes = sum(fields.get(name, 0) for name in PROCESS_FIELDS)
    kernel = sum(fields.get(name, 0) for name in KERNEL_FIELDS)
    gpu_reported = sum(app['used_bytes'] or 0 for app in gpu_apps)
    in_use = total - available
    meminfo_gap = max(in_use - processes - kernel, 0)
    warnings = []

    cuda_gap = None
    cuda_whole_pool = None
    cuda_offset = None
    healthy_offset_gib = (min(baseline['cuda_offset_gib'], MAX_BASELINE_CUDA_OFFSET_GIB) if baseline
                          else HEALTHY_CUDA_OFFSET_GIB)
    if cuda is not None and unified:
        cuda_total, cuda_free = cuda
        cuda_whole_pool = cuda_total >= WHOLE_POOL_SHARE * total
        if cuda_whole_pool:
            # CUDA's free follows MemFree (page cache included in what it cannot use).
            cuda_offset = fields.get('MemFree', available) - cuda_free
            cuda_gap = max(cuda_offset - healthy_offset_gib * GIB, 0)
        else:
            warnings.append('CUDA sees %.1f of %.1f GiB: the DGX OS modprobe override is active '
                            '(rule H2); remove /etc/modprobe.d/zz-nvidia-drm-override.conf and '
                            'reboot' % (cuda_total / GIB, total / GIB))

    unaccounted = meminfo_gap
    basis = 'meminfo'
    if cuda_gap is not None and cuda_gap > meminfo_gap:
        unaccounted, basis = cuda_gap, 'cuda'
    over = unaccounted > leak_threshold_gib * GIB
    leaked = over and not gpu_apps
    if over and gpu_apps:
        warnings.append('%.1f GiB unaccounted while %d GPU process(es) run (%s): that may be their '
                        'memory, not a leak; stop the serving containers and check again'
                        % (unaccounted / GIB, len(gpu_apps),
                           ', '.join('%s[%s]' % (app['name'], app['pid']) for app in gpu_apps)))
    return {
        'total_gib': to_gib(total),
        'available_gib': to_gib(available),
        'free_gib': to_gib(fields.get('MemFree', 0)),
        'page_cache_gib': to_gib(cache),
        'processes_gib': to_gib(processes),
        'reclaimable_gib': to_gib(max(available - fields.get('MemFree', available), 0)),
        'locked_gib': to_gib(fields.get('Mlocked', 0)),
        'gpu_held_gib': to_gib(meminfo_gap) if gpu_apps else 0.0,
        # H11: CMA free beyond any CMA area: Kexec HandOver's scratch pageblocks (NVIDIA/NV-Kernels
        # PR 591: CmaTotal 0, CmaFree ~9.7 GiB on kernel 7.0.0-1019-nvidia), unfit for long-term pins.
        'kho_cma_gib': to_gib(max(fields.get('CmaFree', 0) - fields.get('CmaTotal', 0), 0)),
        'leak_gib': to_gib(unaccounted) if leaked else 0.0,
        'kernel_gib': to_gib(kernel),
        'gpu_processes_gib': to_gib(gpu_reported),
        'cuda_total_gib': to_gib(cuda[0]) if cuda else None,
        'cuda_free_gib': to_gib(cuda[1]) if cuda else None,
        'cuda_sees_whole_pool': cuda_whole_pool,
        'cuda_offset_gib': None if cuda_offset is None else to_gib(cuda_offset),
        'healthy_cuda_offset_gib': float(healthy_offset_gib),
        'healthy_offset_source': 'baseline' if baseline else 'field',
        'unaccounted_gib': to_gib(unaccounted),
        'unaccounted_basis': basis,
        'gpu_workload': bool(gpu_apps),
        'unified': unified,
        'leak_threshold_gib': float(leak_threshold_gib),
        'leaked': leaked,
        'warnings': warnings,
    }


class MeasureError(Exception):
    """A source could not be read; the message names the variable that points at it."""

    def __init__(self, msg, **details):
        super(MeasureError, self).__init__(msg)
        self.details = details


def read_baseline(path):
    """The node's clean record at path ({cuda_offset_gib, recorded_at, reason}), None when there is
    none; MeasureError when the file is there but unusable (the fix: remove it, the next clean
    measurement writes it again)."""
    if not path:
        return None
    try:
        with open(path) as handle:
            record = json.load(handle)
        offset = float(record['cuda_offset_gib'])
    except (IOError, OSError) as exc:
        if not os.path.exists(path):
            return None
        raise MeasureError('cannot read the memory baseline %s: %s' % (path, exc))
    except (ValueError, KeyError, TypeError) as exc:
        raise MeasureError('the memory baseline %s is not a record this collection wrote (%s): '
                           'remove it; the next clean measurement (leak_recovery) records it again'
                           % (path, exc))
    if offset < 0:
        raise MeasureError('the memory baseline %s holds a negative CUDA offset (%s GiB): remove it'
                           % (path, offset))
    record['cuda_offset_gib'] = offset
    return record


def baseline_to_record(figures, mode, reason, now=None):
    """The record to write for a measurement, or None when mode says not to or the node is not
    known to be clean: CUDA sees the whole pool, no GPU process runs, and the reading is healthy
    against the offset it was judged by (so a node that leaked before the collection first saw it
    never makes its leak its baseline; after a reboot the collection made, it replaces the record),
    and the gap is no more than a clean GB10 shows (MAX_BASELINE_CUDA_OFFSET_GIB)."""
    if mode not in BASELINE_MODES:
        raise ValueError('record_baseline must be one of %s, got %r' % (', '.join(BASELINE_MODES), mode))
    if mode == 'never' or (mode == 'if_missing' and figures['healthy_offset_source'] == 'baseline'):
        return None
    if figures['cuda_offset_gib'] is None or figures['gpu_workload'] or figures['leaked']:
        return None
    if figures['cuda_offset_gib'] > MAX_BASELINE_CUDA_OFFSET_GIB:
        # Not what a clean GB10 shows: memory is held that a baseline must not make normal.
        return None
    stamp = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now))
    # The clean reading itself, kept beside the offset: the node's meminfo and CUDA's view with no
    # engine, which the conformance report gives next to the reading while it serves.
    reading = dict((key, figures[key]) for key in CLEAN_READING if figures.get(key) is not None)
    return {'cuda_offset_gib': max(figures['cuda_offset_gib'], 0.0), 'recorded_at': stamp, 'reason': reason,
            'reading': reading}


def baseline_text(record):
    """The file's content for a record: one JSON object, keys sorted, a final newline."""
    return json.dumps(record, sort_keys=True, indent=2) + '\n'


def rss_bytes(proc_root, pid):
    """VmRSS of <proc_root>/<pid>/status in bytes, None when the process is not visible there."""
    try:
        with open(os.path.join(proc_root, str(pid), 'status')) as handle:
            for line in handle:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) * 1024
    except (IOError, OSError, ValueError, IndexError):
        return None
    return None


def _run(run, command, args, variable):
    try:
        argv = shlex.split(command) + args
    except ValueError as exc:
        raise MeasureError('%s=%r cannot be split into a command: %s' % (variable, command, exc))
    if not argv:
        raise MeasureError('%s is empty: give the command to run' % variable)
    try:
        rc, out, err = run(argv)
    except OSError as exc:
        rc, out, err = 127, '', str(exc)
    if rc != 0:
        raise MeasureError('%s failed (rc=%d): %s. Check that the NVIDIA driver is installed and '
                           'loaded on this node, or set %s.'
                           % (' '.join(argv), rc, (err or out).strip() or 'no output', variable),
                           rc=rc, stdout=out, stderr=err)
    return out


def _gib_or_none(value):
    return None if value is None else to_gib(value)


def measure(run, proc_root='/proc', nvidia_smi='nvidia-smi', gpu_source='auto', cuda_probe='',
            leak_threshold_gib=DEFAULT_LEAK_THRESHOLD_GIB, baseline_file=DEFAULT_BASELINE_FILE):
    """Read a node's memory, GPU and CUDA views and assess them: what the unified_memory module
    returns, and what role node_metrics' exporter publishes (one reading, two readers).

    run(argv) -> (rc, stdout, stderr) runs a command. Returns (result, warnings); raises
    MeasureError naming the variable of the source that failed.
    """
    path = os.path.join(proc_root, 'meminfo')
    try:
        with open(path) as handle:
            fields = parse_meminfo(handle.read())
    except (IOError, OSError) as exc:
        raise MeasureError('cannot read %s: %s. Set proc_root (gb10_proc_root) to the proc '
                           'filesystem of the node.' % (path, exc))
    except MeminfoError as exc:
        raise MeasureError('%s: %s' % (path, exc))

    source = 'nvml' if gpu_source == 'auto' and HAS_PYNVML else gpu_source
    source = 'nvidia_smi' if source == 'auto' else source
    try:
        if source == 'nvml':
            if not HAS_PYNVML:
                raise MeasureError('gpu_source=nvml but nvidia-ml-py (pynvml) is not importable '
                                   'on this node: install it or use gpu_source=nvidia_smi')
            gpus, apps = nvml_query()
        else:
            variable = 'nvidia_smi (gb10_nvidia_smi)'
            gpus = parse_gpus(_run(run, nvidia_smi, gpu_query_args(), variable))
            apps = parse_apps(_run(run, nvidia_smi, apps_query_args(), variable))
    except NvidiaSmiError as exc:
        raise MeasureError('GPU view through %s: %s' % (source, exc))

    probe = cuda_probe.strip()
    cuda_source, cuda = 'none', None
    try:
        if not probe:
            cuda_source, cuda = 'libcuda', probe_libcuda()
        elif probe != 'none':
            out = _run(run, probe, [], 'cuda_probe (gb10_cuda_probe)')
            cuda_source, cuda = 'command', parse_probe_output(out)
    except CudaProbeError as exc:
        raise MeasureError('CUDA-visible memory: %s (cuda_probe=%r, variable gb10_cuda_probe)'
                           % (exc, probe))

    baseline = read_baseline(baseline_file)
    unified = bool(gpus) and all(gpu['memory_total_bytes'] is None for gpu in gpus)
    figures = assess(fields, apps, cuda, leak_threshold_gib, unified=unified, baseline=baseline)
    warnings = figures.pop('warnings')
    processes = [{'pid': app['pid'], 'name': app['name'],
                  'used_gib': _gib_or_none(app['used_bytes']),
                  'rss_gib': _gib_or_none(rss_bytes(proc_root, app['pid']))} for app in apps]
    gpu_list = [{'index': gpu['index'], 'name': gpu['name'], 'uuid': gpu['uuid'],
                 'memory_total_gib': _gib_or_none(gpu['memory_total_bytes']),
                 'memory_free_gib': _gib_or_none(gpu['memory_free_bytes'])} for gpu in gpus]
    versions = sorted(set(gpu['driver_version'] for gpu in gpus if gpu['driver_version']))
    figures.update(gpu_processes=processes, gpus=gpu_list, driver_version=', '.join(versions),
                   gpu_source=source, cuda_source=cuda_source, baseline=baseline)
    return figures, warnings
