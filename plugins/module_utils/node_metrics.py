# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's metrics page (rule O6): what gb10.serving.unified_memory reports, as Prometheus text.

Pure functions: role node_metrics' exporter (roles/node_metrics/files/gb10_node_metrics.py) reads
the node with unified_memory.measure() and the collection's textfiles, these turn that into the
page it serves. The figures keep the module's unit and rounding (GiB, 0.01) so that a scrape and a
run of the module on the same node give the same numbers.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

# Unified-memory figures the module returns, published as gb10_unified_memory_<key without _gib>_gib.
MEMORY_FIGURES = (
    ('total_gib', 'The node\'s unified memory pool (MemTotal).'),
    ('available_gib', 'MemAvailable: what a new allocation can still get.'),
    ('free_gib', 'MemFree.'),
    ('page_cache_gib', 'Page cache and buffers (rule H3 drops them before a launch).'),
    ('processes_gib', 'Anonymous and shared memory of processes.'),
    ('kernel_gib', 'Kernel bookkeeping: unreclaimable slab, stacks, page tables.'),
    # Cache, engine and leak apart: on a GB10 all three lower CUDA's free figure (MemFree).
    ('reclaimable_gib', 'Page cache the kernel reclaims on demand (MemAvailable - MemFree): counted as used by '
                        'CUDA on a GB10, not by vLLM or the fit (rules H3, M2).'),
    ('locked_gib', 'Pages processes locked with mlock: in use, not a leak.'),
    ('gpu_held_gib', 'What a running GPU workload holds (a live vLLM engine: its utilization x the pool).'),
    ('leak_gib', 'Leaked unified memory: the unaccounted memory when the verdict is leaked, else 0 (rule H4).'),
    ('unaccounted_gib', 'Memory in use that nothing explains; above the threshold with no GPU '
                        'process it is a leak only a reboot frees (rule H4).'),
    ('leak_threshold_gib', 'The leak threshold applied.'),
    ('cuda_free_gib', 'Free memory as CUDA sees it (absent without a CUDA view).'),
    ('cuda_total_gib', 'Total memory as CUDA sees it (absent without a CUDA view).'),
)


def _number(value):
    if value is None:
        return 'NaN'
    if isinstance(value, bool):
        return '1' if value else '0'
    return repr(float(value)) if isinstance(value, float) else str(value)


def _label(value):
    return str(value).replace('\\', '\\\\').replace('\n', '\\n').replace('"', '\\"')


class _Page(object):
    def __init__(self):
        self.lines = []

    def metric(self, name, kind, help_text, samples):
        """samples: [(labels dict, value)]; a metric without samples is left out."""
        samples = list(samples)
        if not samples:
            return
        self.lines.append('# HELP %s %s' % (name, help_text))
        self.lines.append('# TYPE %s %s' % (name, kind))
        for labels, value in samples:
            text = ','.join('%s="%s"' % (key, _label(labels[key])) for key in sorted(labels))
            self.lines.append('%s%s %s' % (name, '{%s}' % text if text else '', _number(value)))


def metrics_text(reading, error, read_at, read_seconds):
    """The exporter's own metrics.

    reading: the dict unified_memory.measure() returned (None when the read failed);
    error: the failure's message or None; read_at: Unix time of the read; read_seconds: its cost.
    """
    page = _Page()
    page.metric('gb10_node_metrics_read_ok', 'gauge',
                '1 when the last read of memory, GPU and CUDA succeeded (the exporter logs why not).',
                [({}, error is None)])
    page.metric('gb10_node_metrics_read_timestamp_seconds', 'gauge', 'When the last read ended (Unix time).',
                [({}, read_at)])
    page.metric('gb10_node_metrics_read_duration_seconds', 'gauge', 'How long the last read took.',
                [({}, round(read_seconds, 3))])
    if reading is None:
        return '\n'.join(page.lines) + '\n'
    for key, help_text in MEMORY_FIGURES:
        if reading.get(key) is not None:
            page.metric('gb10_unified_memory_%s' % key, 'gauge', help_text + ' GiB.', [({}, reading[key])])
    page.metric('gb10_unified_memory_leaked', 'gauge',
                '1 when unaccounted memory is above the threshold and no GPU process runs (rule H4).',
                [({}, reading['leaked'])])
    page.metric('gb10_unified_memory_unified', 'gauge',
                '1 when the GPU draws on the system pool (GB10), 0 for a GPU with memory of its own.',
                [({}, reading['unified'])])
    page.metric('gb10_gpu_workload', 'gauge', '1 while at least one GPU compute process runs.',
                [({}, reading['gpu_workload'])])
    page.metric('gb10_gpu_processes', 'gauge', 'GPU compute processes the driver lists.',
                [({}, len(reading['gpu_processes']))])
    page.metric('gb10_gpu_info', 'gauge', 'The GPUs and the driver they report (rule H1 pins 580.x).',
                [({'index': gpu['index'], 'name': gpu['name'], 'driver_version': reading['driver_version']}, 1)
                 for gpu in reading['gpus']])
    return '\n'.join(page.lines) + '\n'


def clock_text(clock, verdict, floor_mhz):
    """The GPU clock's series (rule H12). clock: (SM clock MHz, utilization %) of this read, None
    when nvidia-smi could not say; verdict: gpu_clock.verdict() of the last readings under load;
    floor_mhz: the clock under load below which a node is stuck low."""
    page = _Page()
    if clock is not None:
        page.metric('gb10_gpu_sm_clock_mhz', 'gauge', 'The GPU\'s SM clock at the last read (an idle GPU clocks down).',
                    [({}, clock[0])])
        page.metric('gb10_gpu_utilization_percent', 'gauge', 'The GPU\'s utilization at the last read.',
                    [({}, clock[1])])
    page.metric('gb10_gpu_clock_floor_mhz', 'gauge', 'The SM clock under load below which the node is stuck low (H12).',
                [({}, floor_mhz)])
    if verdict['state'] != 'unknown':
        page.metric('gb10_gpu_sm_clock_under_load_mhz', 'gauge',
                    'Median SM clock of the last readings taken under load (H12).', [({}, verdict['clock_mhz'])])
        page.metric('gb10_gpu_clock_under_load_timestamp_seconds', 'gauge',
                    'When the last reading under load was taken (Unix time).', [({}, verdict['at'])])
        page.metric('gb10_gpu_clock_low', 'gauge',
                    '1 when the SM clock under load is below the floor: the GB10 low-power state that halves '
                    'decode until the Spark is taken off AC power (H12).', [({}, verdict['state'] == 'low')])
    return '\n'.join(page.lines) + '\n'


def textfiles(root):
    """Every *.prom under root (the collection's state folder: the watchdog's, the link check's),
    in path order, as (path, text). A file that cannot be read is left out, not fatal: a scrape
    still gets the node's own figures."""
    found = []
    for path in sorted(glob.glob(os.path.join(root, '**', '*.prom'), recursive=True)):
        try:
            with open(path) as handle:
                text = handle.read()
        except (IOError, OSError):
            continue
        found.append((path, text if text.endswith('\n') or not text else text + '\n'))
    return found


def page(own, files):
    """The page served: the exporter's metrics, then each textfile under a comment naming it."""
    return own + ''.join('# from %s\n%s' % (path, text) for path, text in files)
