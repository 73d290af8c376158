# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a GB10 node's unified memory went, and whether some of it leaked (rule H4).

A crashed or hard-stopped container can leave tens of GB held by the driver: no process owns it,
nvidia-smi does not show it, drop_caches does not free it. So, with caches dropped and no GPU
workload running, "unaccounted" = memory in use that neither processes (anonymous pages, shared
memory) nor the kernel's own bookkeeping (unreclaimable slab, stacks, page tables) explain. The
field reports also saw the leak only in CUDA's view ("free -g shows plenty of RAM"), so where
CUDA sees the whole pool the gap between CUDA's free and MemAvailable counts too; the larger of
the two is reported.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gb10.serving.plugins.module_utils.meminfo import to_gib

# Tens of GB leaked were seen (33 GB per failed run, 90 GB on one node); a healthy node has a
# few GB that no counter explains (firmware carve-outs, driver bookkeeping). 10 GiB sits between.
DEFAULT_LEAK_THRESHOLD_GIB = 10.0
# CUDA's total is "the whole pool" when it is at least this share of MemTotal; with the DGX OS
# modprobe override CUDA sees ~62 of 119.7 GB (rule H2) and its free figure says nothing about
# the rest of the pool.
WHOLE_POOL_SHARE = 0.9
KERNEL_FIELDS = ('SUnreclaim', 'KernelStack', 'PageTables', 'SecPageTables')
PROCESS_FIELDS = ('AnonPages', 'Shmem')
GIB = 1024.0 ** 3


def assess(fields, gpu_apps=None, cuda=None, leak_threshold_gib=DEFAULT_LEAK_THRESHOLD_GIB,
           unified=True):
    """The module's figures from parsed meminfo (bytes), GPU processes and CUDA (total, free).

    gpu_apps: list of {pid, name, used_bytes or None}; cuda: (total, free) bytes or None;
    unified: the GPU draws on the system pool (GB10: nvidia-smi reports no memory of its own).
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
    if cuda is not None and unified:
        cuda_total, cuda_free = cuda
        cuda_whole_pool = cuda_total >= WHOLE_POOL_SHARE * total
        if cuda_whole_pool:
            cuda_gap = max(available - cuda_free, 0)
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
        'kernel_gib': to_gib(kernel),
        'gpu_processes_gib': to_gib(gpu_reported),
        'cuda_total_gib': to_gib(cuda[0]) if cuda else None,
        'cuda_free_gib': to_gib(cuda[1]) if cuda else None,
        'cuda_sees_whole_pool': cuda_whole_pool,
        'unaccounted_gib': to_gib(unaccounted),
        'unaccounted_basis': basis,
        'gpu_workload': bool(gpu_apps),
        'unified': unified,
        'leak_threshold_gib': float(leak_threshold_gib),
        'leaked': leaked,
        'warnings': warnings,
    }
