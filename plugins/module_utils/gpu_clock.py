# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU's SM clock under load (rule H12): a GB10 stuck in its low-power state.

A GB10 can stay in a low-power state in which its SM clock sits at ~702 MHz even while a model
generates, where a healthy one runs at ~2398 MHz: single-stream decode halves (24-28 against 50-53
tok/s), an OS reboot does not clear it, and only taking the Spark off AC power for some minutes did
(eugr/spark-vllm-docker issue 334). Another owner's nvidia-smi log of the same state reads ~2223 MHz
idle, then 890 MHz idle and 858, 695 MHz at 96 % utilization (hasso5703/dgx-spark-qwen38 issue 8).
An idle GPU clocks down on its own, so only readings taken while the GPU works say anything.

Pure functions: role node_metrics' exporter runs the query every interval, keeps the last readings
under load and publishes the verdict; status and the alert rules read it from there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

FIELDS = ('clocks.sm', 'utilization.gpu')
# A reading counts as under load from this utilization on: the stuck state's log reads 96 %, an
# idle Spark 0 % (hasso5703/dgx-spark-qwen38 issue 8).
LOAD_PCT = 50
# The verdict is the median of the last readings under load, so one reading taken while the clock
# ramps up does not make a Spark "stuck", and one good reading does not clear a stuck one.
KEEP = 3
FIX = ('shut the Spark down, take it off AC power (the USB-C cable and the adapter) for a few minutes and '
       'start it again: an OS reboot does not clear this state (eugr/spark-vllm-docker issue 334)')


class ClockError(ValueError):
    """nvidia-smi output that does not answer the clock query."""


def query_args():
    """Arguments after the nvidia-smi command for the query parse() reads."""
    return ['--query-gpu=' + ','.join(FIELDS), '--format=csv,noheader,nounits']


def parse(text):
    """(SM clock in MHz, utilization in %) of the first GPU from query_args()'s output."""
    lines = [line for line in (text or '').splitlines() if line.strip()]
    if not lines:
        raise ClockError('nvidia-smi printed nothing for --query-gpu=%s' % ','.join(FIELDS))
    cells = [cell.strip() for cell in lines[0].split(',')]
    if len(cells) != len(FIELDS):
        raise ClockError('nvidia-smi printed %r for --query-gpu=%s: expected %d values'
                         % (lines[0], ','.join(FIELDS), len(FIELDS)))
    try:
        return int(float(cells[0])), int(float(cells[1]))
    except ValueError:
        raise ClockError('nvidia-smi printed %r for --query-gpu=%s: expected numbers (--format=csv,noheader,nounits)'
                         % (lines[0], ','.join(FIELDS)))


def keep(readings, clock_mhz, utilization_pct, at):
    """readings with (clock_mhz, utilization_pct, at) added when it was taken under load, the
    last KEEP of them; an idle reading changes nothing."""
    if utilization_pct < LOAD_PCT:
        return list(readings)
    return (list(readings) + [(clock_mhz, utilization_pct, at)])[-KEEP:]


def verdict(readings, floor_mhz):
    """What the readings under load say: {'state': 'low' | 'ok' | 'unknown', 'clock_mhz': their
    median (None without one), 'readings': how many, 'at': the last one's time}."""
    if not readings:
        return {'state': 'unknown', 'clock_mhz': None, 'readings': 0, 'at': None}
    clocks = sorted(clock for clock, _utilization, _at in readings)
    median = clocks[len(clocks) // 2] if len(clocks) % 2 else (clocks[len(clocks) // 2 - 1] + clocks[len(clocks) // 2]) / 2.0
    return {'state': 'low' if median < floor_mhz else 'ok', 'clock_mhz': median,
            'readings': len(readings), 'at': readings[-1][2]}


def describe(node, clock_mhz, floor_mhz):
    """The line a person reads for a node whose clock under load is below the floor."""
    return ('%s: GPU clock %d MHz under load, below %d MHz: the GB10 is stuck in its low-power state and decodes at '
            'about half speed (H12). Fix: %s' % (node, clock_mhz, floor_mhz, FIX))
