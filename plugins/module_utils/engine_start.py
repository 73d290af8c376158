# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An engine start by phase, read from the engine's log (rule V7): what the conformance report
(playbooks/report.yml) gives for the start-up time the readiness wait is sized for. Pure functions
over the log's text; no I/O.

The lines are vLLM's own, as vLLM 0.32 writes them (its logger's format, `vllm/logger.py`:
`(<process> pid=<pid>) INFO <mm-dd HH:MM:SS> [<file>:<line>] <message>`), each phase from the file
that logs it; the start is the control script's own line (`gb10-engine: starting <UTC time>`,
roles/vllm_serve/templates/launch.sh.j2), which opens every start in the same log.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re

START = re.compile(r'^gb10-engine: starting (\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)Z\s*$')
ANSI = re.compile(r'\x1b\[[0-9;]*m')
LINE = re.compile(r'(?:INFO|WARNING|DEBUG|ERROR)\s+(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.\d+)?\s+\[[^\]]*\]\s+(.*)$')
# (pattern, the figure each group is). A figure several ranks log (each Ray worker or headless rank
# loads its own shard) counts its slowest rank: the start waits for that one.
PHASES = (
    # vllm/model_executor/model_loader/default_loader.py
    (re.compile(r'Loading weights took ([\d.]+) seconds'), ('weights_s',)),
    # vllm/v1/worker/gpu_model_runner.py
    (re.compile(r'Model loading took ([\d.]+) GiB memory and ([\d.]+) seconds'), ('model_gib', 'model_load_s')),
    # vllm/compilation/monitor.py
    (re.compile(r'torch\.compile took ([\d.]+) s in total'), ('compile_s',)),
    # vllm/v1/worker/gpu_worker.py
    (re.compile(r'Available KV cache memory: ([\d.]+) GiB'), ('kv_cache_gib',)),
    # vllm/v1/worker/gpu_model_runner.py
    (re.compile(r'Graph capturing finished in ([\d.]+) secs, took ([\d.]+) GiB'), ('graphs_s', 'graphs_gib')),
    # vllm/v1/engine/core.py: the memory profile, the KV cache, the warm-up (compilation included)
    (re.compile(r'init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s'), ('engine_init_s',)),
)
# vllm/entrypoints/launchers/api_server/entry.py: logged when the app is built, right before the
# server listens; /health answers from then on.
READY = re.compile(r'Starting vLLM server on ')


def last_start(text):
    """The lines of the last start in the log (from its last `gb10-engine: starting` line on), and
    that line's time; ([], None) when the log holds no start."""
    lines = [ANSI.sub('', line) for line in (text or '').splitlines()]
    for index in range(len(lines) - 1, -1, -1):
        match = START.match(lines[index].strip())
        if match:
            started = datetime.datetime(*[int(part) for part in match.groups()])
            return lines[index + 1:], started
    return [], None


def phases(text):
    """The last start's phases: {'started_at', 'ready_after_s' (None until the server listens),
    the phases' seconds (each its slowest rank's), 'model_gib', 'graphs_gib', 'kv_cache_gib'}; None
    when the log holds no start. The log's times carry no year and are the container's clock
    (UTC in the serving images): the year is the start line's, and a year boundary is crossed."""
    lines, started = last_start(text)
    if started is None:
        return None
    out = {'started_at': started.strftime('%Y-%m-%dT%H:%M:%SZ'), 'ready_after_s': None}
    for line in lines:
        match = LINE.search(line)
        if not match:
            continue
        message = match.group(6)
        for pattern, keys in PHASES:
            found = pattern.search(message)
            for key, value in zip(keys, found.groups() if found else ()):
                out[key] = max(out.get(key) or 0.0, float(value))
        if out['ready_after_s'] is None and READY.search(message):
            month, day, hour, minute, second = [int(part) for part in match.groups()[:5]]
            try:
                at = datetime.datetime(started.year, month, day, hour, minute, second)
            except ValueError:
                continue
            if at < started - datetime.timedelta(days=1):
                at = at.replace(year=started.year + 1)
            out['ready_after_s'] = max((at - started).total_seconds(), 0.0)
    return out


def summary(found):
    """'ready 41 s after the start (weights 2.1 s, engine init 12.3 s, ...)' of phases(); '' when none."""
    if not found:
        return ''
    names = (('weights_s', 'weights'), ('model_load_s', 'model load'), ('compile_s', 'torch.compile'),
             ('graphs_s', 'CUDA graphs'), ('engine_init_s', 'engine init'))
    parts = ['%s %.1f s' % (label, found[key]) for key, label in names if found.get(key) is not None]
    head = ('ready %.0f s after the start of %s' % (found['ready_after_s'], found['started_at'])
            if found.get('ready_after_s') is not None else 'not ready yet, started %s' % found['started_at'])
    return head + (' (%s)' % ', '.join(parts) if parts else '')
