# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse /proc/meminfo. Pure functions: the modules read the file, these turn it into numbers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

KIB_PER_GIB = 1024.0 * 1024.0


class MeminfoError(ValueError):
    """/proc/meminfo text that cannot be read as meminfo."""


def parse_meminfo(text):
    """Return {field: bytes} from the text of /proc/meminfo.

    Lines look like ``MemTotal:       124605468 kB``; HugePages_* counts carry no unit.
    Raises MeminfoError for empty input or when MemTotal is missing.
    """
    fields = {}
    for lineno, line in enumerate((text or '').splitlines(), 1):
        if not line.strip():
            continue
        name, sep, rest = line.partition(':')
        parts = rest.split()
        if not sep or not parts:
            raise MeminfoError('meminfo line %d is not "Name: value [kB]": %r' % (lineno, line))
        try:
            value = int(parts[0])
        except ValueError:
            raise MeminfoError('meminfo line %d has a non-numeric value: %r' % (lineno, line))
        unit = parts[1].lower() if len(parts) > 1 else ''
        fields[name.strip()] = value * 1024 if unit == 'kb' else value
    if 'MemTotal' not in fields:
        raise MeminfoError('no MemTotal line: this is not the content of /proc/meminfo')
    return fields


def to_gib(num_bytes):
    """Bytes to GiB, rounded to 0.01 for reports."""
    return round(num_bytes / (KIB_PER_GIB * 1024.0), 2)


def summarize(fields):
    """The figures the GB10 rules talk about, in GiB: total, available, free, page cache."""
    cache = fields.get('Cached', 0) + fields.get('Buffers', 0)
    return {
        'total_gib': to_gib(fields['MemTotal']),
        'available_gib': to_gib(fields.get('MemAvailable', fields.get('MemFree', 0))),
        'free_gib': to_gib(fields.get('MemFree', 0)),
        'page_cache_gib': to_gib(cache),
    }


def read_meminfo(module, proc_root):
    """{field: bytes} of <proc_root>/meminfo; fails the module with the path and the fix."""
    path = os.path.join(proc_root, 'meminfo')
    try:
        with open(path) as handle:
            return parse_meminfo(handle.read())
    except (IOError, OSError) as exc:
        module.fail_json(msg='cannot read %s: %s. Set proc_root (gb10_proc_root) to the proc '
                             'filesystem of the node.' % (path, exc))
    except MeminfoError as exc:
        module.fail_json(msg='%s: %s' % (path, exc))
