# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare the nodes' free memory before launch and size GPU memory utilization for the poorest
(rules H5, H6).

SGLang refuses to load when one rank has less than 90% of another's free memory ("The memory
capacity is unbalanced"); vLLM refuses when a node's free memory is below utilization x total.
A node short of headroom swaps, loads 4x slower and makes rank 0 time out, so the fraction every
node gets is the one the poorest node can afford, never above 0.90 (OOM, Xid 43).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.gb10.serving.plugins.module_utils.profile import UTILIZATION_CEILING

MAX_IMBALANCE = 0.10  # SGLang: min free >= 0.9 x local free
CEILING = UTILIZATION_CEILING  # rule H6


class MemoryBalanceError(ValueError):
    """Per-node input that cannot be compared."""


def _number(host, data, key):
    try:
        value = float(data[key])
    except (KeyError, TypeError, ValueError):
        raise MemoryBalanceError('%s: %s missing or not a number (give the result of '
                                 'gb10.serving.unified_memory or drop_page_cache "after")'
                                 % (host, key))
    if value < 0 or (key == 'total_gib' and value == 0):
        raise MemoryBalanceError('%s: %s is %s' % (host, key, value))
    return value


def balance(nodes, max_imbalance=MAX_IMBALANCE, ceiling=CEILING, headroom_gib=1.0):
    """nodes: {host: {'available_gib': x, 'total_gib': y, ...}} -> report dict.

    ``utilization`` = min(ceiling, min over nodes of (available - headroom) / total), floored to
    0.01. ``balanced`` is False when the poorest node has less than (1 - max_imbalance) of the
    richest node's free memory.
    """
    if not nodes:
        raise MemoryBalanceError('no nodes to compare: pass every node\'s memory figures')
    table = []
    for host in sorted(nodes):
        data = nodes[host] or {}
        available = _number(host, data, 'available_gib')
        total = _number(host, data, 'total_gib')
        if available > total:
            raise MemoryBalanceError('%s: available_gib %.2f is above total_gib %.2f'
                                     % (host, available, total))
        affordable = math.floor(max(available - headroom_gib, 0.0) / total * 100 + 1e-9) / 100
        table.append({'host': host, 'available_gib': round(available, 2),
                      'total_gib': round(total, 2), 'affordable_utilization': affordable})
    poorest = min(table, key=lambda row: (row['available_gib'], row['host']))
    richest = max(table, key=lambda row: (row['available_gib'], row['host']))
    spread = richest['available_gib'] - poorest['available_gib']
    fraction = spread / richest['available_gib'] if richest['available_gib'] else 1.0
    limiting = min(table, key=lambda row: (row['affordable_utilization'], row['host']))
    utilization = min(ceiling, limiting['affordable_utilization'])
    return {
        'nodes': table,
        'poorest': poorest['host'],
        'richest': richest['host'],
        'spread_gib': round(spread, 2),
        'spread_fraction': round(fraction, 4),
        'balanced': fraction <= max_imbalance + 1e-9,
        'utilization': utilization,
        'limited_by': 'ceiling' if utilization == ceiling and limiting['affordable_utilization'] >= ceiling
                      else limiting['host'],
    }
