# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One look at the cluster (playbooks/status.yml): what serves, how each node stands, and the one
command that serves again when nothing does.

Every node's figures come from its own exporter (role node_metrics, rule O6): the unified memory as
module unified_memory splits it (the engine's hold, the page cache, what is free, the leak
verdict, H4), the GPU's clock under load (H12), the link's last measurement (N5) and, on the
head, the watchdog's state (O4). The head's engine is asked the way the deploy asks it (role
vllm_serve, entry point probe, O2).
Nothing here reads a secret: a client key is shown as the first 12 hex digits of its SHA-256.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.gb10.serving.plugins.module_utils.gpu_clock import describe as describe_clock
from ansible_collections.gb10.serving.plugins.module_utils.profile import data_parallel, pipeline

# A sample line of Prometheus' text format: name, optional {labels}, value (timestamps unused).
_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """{name: [(labels dict, float)]} of every sample in an exporter's text; comments skipped, a
    value that is not a number (NaN included) kept as None."""
    found = {}
    for line in (text or '').splitlines():
        if not line or line.startswith('#'):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, labels, value = match.groups()
        try:
            number = float(value)
        except ValueError:
            number = None
        if number is not None and math.isnan(number):  # NaN: no result
            number = None
        found.setdefault(name, []).append((dict(_LABEL.findall(labels or '')), number))
    return found


def _first(metrics, name):
    samples = metrics.get(name) or []
    return samples[0][1] if samples else None


def node_figures(text, reading=None):
    """What status shows of one node: its memory as module unified_memory read it (reading: the
    module's result; the collection's page serves the same figures where the reading is missing), its
    link and, on the head, the watchdog from the collection's page in the node exporter's answer
    (text). None when neither is there: a node exporter that answers without the page (its reader
    removed by teardown.yml) has none of the collection's figures."""
    m = parse_metrics(text or '')
    page = 'gb10_node_metrics_read_ok' in m
    if not page and not reading:
        return None
    reading = reading or {}

    def memory(key):
        value = reading.get(key)
        return value if value is not None else _first(m, 'gb10_unified_memory_' + key)

    leaked = reading.get('leaked')
    if leaked is None:
        leaked = None if _first(m, 'gb10_unified_memory_leaked') is None else _first(m, 'gb10_unified_memory_leaked') == 1
    figures = {
        'memory': {
            'total_gib': memory('total_gib'),
            'available_gib': memory('available_gib'),
            'free_gib': memory('free_gib'),
            'page_cache_gib': memory('page_cache_gib'),
            'engine_gib': memory('gpu_held_gib'),
            'locked_gib': memory('locked_gib'),
            'leak_gib': memory('leak_gib'),
            'leaked': leaked,
        },
        'page': page,
        'gpu_clock': None,
        'link': None,
        'watchdog': None,
    }
    if 'gb10_gpu_clock_low' in m:
        figures['gpu_clock'] = {
            'under_load_mhz': _first(m, 'gb10_gpu_sm_clock_under_load_mhz'),
            'floor_mhz': _first(m, 'gb10_gpu_clock_floor_mhz'),
            'low': _first(m, 'gb10_gpu_clock_low') == 1,
            'measured_at': _first(m, 'gb10_gpu_clock_under_load_timestamp_seconds'),
        }
    if 'gb10_link_check_ok' in m:
        figures['link'] = {
            'busbw_gbit': _first(m, 'gb10_link_allreduce_busbw_gbit'),
            'floor_gbit': _first(m, 'gb10_link_floor_gbit'),
            'tcp_gbit': _first(m, 'gb10_link_tcp_gbit'),
            'ok': _first(m, 'gb10_link_check_ok') == 1,
            'measured_at': _first(m, 'gb10_link_check_timestamp_seconds'),
        }
    if 'gb10_watchdog_up' in m:
        state = [labels.get('status') for labels, value in m.get('gb10_watchdog_status', []) if value == 1]
        figures['watchdog'] = {
            'status': state[0] if state else None,
            'restart_budget_left': _first(m, 'gb10_watchdog_restart_budget_left'),
            'recoveries_total': _first(m, 'gb10_watchdog_recoveries_total'),
            'failed_probes': _first(m, 'gb10_watchdog_failed_probes'),
            'engine_answering': _first(m, 'gb10_engine_answering'),
            'answer_correct': _first(m, 'gb10_engine_answer_correct'),
        }
    return figures


def verdict(engine, nodes):
    """(serving, why, fix): whether the head's engine serves the recorded launch, why not, and which
    command serves again: 'recover' where a node leaked (its memory comes back only with a reboot,
    H4), else 'launch'; None when it serves."""
    engine = engine or {}
    leaked = sorted(host for host, figures in nodes.items()
                    if figures and (figures.get('memory') or {}).get('leaked'))
    if engine.get('serving'):
        return True, 'the engine serves the recorded launch and answers /health', None
    if not engine.get('alive'):
        why = 'no engine runs on the head'
    elif not engine.get('healthy'):
        why = 'the engine runs but does not answer /health'
    else:
        why = 'the engine serves another launch than the recorded one (a launch of another profile or settings)'
    if leaked:
        return False, '%s, and unified memory leaked on %s (H4)' % (why, ', '.join(leaked)), 'recover'
    return False, why, 'launch'


def _gib(value):
    return '?' if value is None else '%.1f' % value


def lines(status):
    """The screen a person reads: the endpoint and the launch first, then a line per node."""
    out = []
    launch = status['launch']
    out.append('%s: %s' % ('SERVING' if status['serving'] else 'NOT SERVING', status['why']))
    out.append('Endpoint: %s (key file %s, CA %s)' % (status['endpoint'], status['key_file'], status['ca_file']))
    out.append('Launch: profile %s%s, %s executor, TP=%s PP=%s DP=%s on %s'
               % (launch['profile'], (' + overlay %s' % launch['overlay']) if launch['overlay'] else '',
                  launch['executor'], launch['tp'], launch['pp'], launch['dp'], ', '.join(launch['nodes'])))
    image = status['image']
    out.append('Image: %s %s; %s' % (image['tag'], (image['id'] or 'absent on the head')[:19],
                                     ', '.join('%s %s' % item for item in sorted(image['versions'].items()))
                                     or 'versions not read (no serving container)'))
    before = status['before']
    out.append(('Launch before: profile %s, image %s %s; %s returns to it' % (
        before['profile'], before['image'] or '(its profile\'s)', before['image_id'][:19], before['rollback']))
        if before else 'Launch before: none recorded (one launch has served since the deploy or a reset)')
    watchdog = status['watchdog']
    if watchdog:
        out.append('Watchdog: %s, restart budget left %s, recoveries %s, last probe answered %s'
                   % (watchdog.get('status') or '?', _int(watchdog.get('restart_budget_left')),
                      _int(watchdog.get('recoveries_total')),
                      {1.0: 'yes', 0.0: 'no'}.get(watchdog.get('engine_answering'), '?')))
    else:
        out.append('Watchdog: no figures (not running, or gb10_watchdog is false)')
    keys = ', '.join('%s %s' % item for item in sorted(status['keys'].items()))
    out.append('Client keys (SHA-256, first 12): %s' % (keys or 'none on this controller'))
    for host in status['nodes_order']:
        node = status['nodes'][host]
        figures = node['figures']
        if figures is None:
            out.append('%s: neither its memory nor its metrics page could be read; container %s; firewall %s'
                       % (host, node['container'], node['firewall']))
            continue
        mem, link, clock = figures['memory'], figures['link'], figures['gpu_clock']
        out.append('%s: memory %s GiB: engine %s, page cache %s, free %s, %s; GPU clock under load %s; link %s; '
                   'container %s; firewall %s'
                   % (host, _gib(mem['total_gib']), _gib(mem['engine_gib']), _gib(mem['page_cache_gib']),
                      _gib(mem['free_gib']),
                      ('LEAKED %s GiB' % _gib(mem['leak_gib'])) if mem['leaked'] else 'no leak',
                      ('%s MHz%s' % (_int(clock['under_load_mhz']), ' STUCK LOW (H12)' if clock['low'] else ''))
                      if clock else 'no reading yet' if figures['page'] else 'no metrics page',
                      ('%s Gb/s (floor %s) %s' % (_gib(link['busbw_gbit']), _gib(link['floor_gbit']),
                                                  'ok' if link['ok'] else 'UNDER ITS FLOOR')) if link
                      else 'not measured' if figures['page'] else 'no metrics page',
                      node['container'], node['firewall']))
    if status['fix']:
        out.append('Fix: %s' % status['fix'])
    # A node stuck at a low clock serves at half speed: not a reason to relaunch, a reason to unplug.
    for host in status['nodes_order']:
        clock = (status['nodes'][host]['figures'] or {}).get('gpu_clock')
        if clock and clock['low']:
            out.append(describe_clock(host, clock['under_load_mhz'], clock['floor_mhz']))
    return out


def _int(value):
    return '?' if value is None else '%d' % value


def build(facts):
    """The status document from what the playbook read (see playbooks/status.yml): profile,
    overlay, executor, nodes (the head first), engine (role vllm_serve's probe, with 'serving'),
    exporters {host: text}, memory {host: module unified_memory's result}, containers {host: state}, firewall {host: state}, image {tag, id},
    versions {name: version}, endpoint, key_file, ca_file, keys {client: fingerprint}, before (the
    head's record of the launch before, O8; empty when none), commands {recover, launch, rollback}."""
    profile = facts['profile']
    nodes = {host: node_figures(facts['exporters'].get(host, ''), (facts.get('memory') or {}).get(host))
             for host in facts['nodes']}
    serving, why, fix = verdict(facts['engine'], nodes)
    head_figures = nodes.get(facts['nodes'][0]) if facts['nodes'] else None
    return {
        'serving': serving,
        'why': why,
        'fix': facts['commands'].get(fix) if fix else None,
        'endpoint': facts['endpoint'],
        'key_file': facts['key_file'],
        'ca_file': facts['ca_file'],
        'keys': facts['keys'],
        'launch': {'profile': profile.get('name'), 'overlay': facts.get('overlay') or '',
                   'executor': facts['executor'], 'tp': profile.get('tensor_parallel_size'),
                   'pp': pipeline(profile), 'dp': data_parallel(profile), 'nodes': list(facts['nodes'])},
        'image': {'tag': facts['image'].get('tag'), 'id': facts['image'].get('id') or '',
                  'versions': dict(facts.get('versions') or {})},
        'before': ({'profile': facts['before'].get('profile'), 'image': facts['before'].get('image') or '',
                    'image_id': facts['before'].get('image_id') or '', 'rollback': facts['commands'].get('rollback')}
                   if facts.get('before') else None),
        'engine': {key: facts['engine'].get(key) for key in ('alive', 'healthy', 'serving', 'pid')},
        'watchdog': (head_figures or {}).get('watchdog'),
        'nodes_order': list(facts['nodes']),
        'nodes': {host: {'figures': nodes[host], 'container': facts['containers'].get(host, '?'),
                         'firewall': facts['firewall'].get(host, '?')}
                  for host in facts['nodes']},
    }
