# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The conformance report (playbooks/report.yml): what a cluster's own nodes measure of every figure
the rules and the simulation's fixture kit rest on, with a verdict per rule. Pure functions over
what the playbook read on each node; no I/O.

A report from a real Spark is how the simulation stays true: the fixture kit builds a simulated
node from a report's node entry (tests/fixtures/gb10-sim/bin/gb10-sim-from-report), so a real
Spark's figures become a test case.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gb10.serving.plugins.module_utils import (
    engine_start, memory_balance, preflight, serving_image, status, unified_memory)

REPORT_FORMAT = 1
# Serial numbers, MAC addresses, GPU and board UUIDs and keys never leave the node in a report.
MAC = re.compile(r'\b[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}\b')
UUID = re.compile(r'\b(?:GPU|MIG)-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}\b')
SERIAL = re.compile(r'(?im)^(\s*(?:serial(?: number)?|board part number|module id)\s*:\s*).*$')
IPV4 = re.compile(r'\b(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?\b')
# The figures the verdicts judge by are the collection's own, defined once where the rule is enforced:
# a whole pool as CUDA sees it (H2), SGLang's 10 % balance (H5), the 580 branch (H1), the slowest
# cluster link (N5).
WHOLE_POOL_SHARE = unified_memory.WHOLE_POOL_SHARE
BALANCE_SHARE = memory_balance.MAX_IMBALANCE
DRIVER_BRANCH = preflight.KNOWN_GOOD_DRIVER_BRANCH
MIN_LINK_MBPS = preflight.MIN_CLUSTER_LINK_MBPS
# CUDA's free figure is MemFree on a GB10 (unslothai/unsloth PR 10704): the readings agree within
# their rounding and a driver's few hundred MB.
CUDA_IS_MEMFREE_GIB = 1.0
# meminfo and CUDA's view, as the page lists them for the reading now and for the clean one (what a
# baseline keeps of its clean reading).
MEMORY_FIGURES = unified_memory.CLEAN_READING


def redact(value, addresses=False):
    """value with MAC addresses, GPU UUIDs and serial numbers replaced (and IPv4 addresses unless
    addresses is true), through lists and dicts."""
    if isinstance(value, dict):
        return dict((k, redact(v, addresses)) for k, v in value.items())
    if isinstance(value, list):
        return [redact(v, addresses) for v in value]
    if not isinstance(value, str):
        return value
    text = MAC.sub('<mac>', value)
    text = UUID.sub('<uuid>', text)
    text = SERIAL.sub(r'\1<serial>', text)
    if not addresses:
        text = IPV4.sub('<address>', text)
    return text


def _verdict(rule, state, figure):
    return {'rule': rule, 'verdict': state, 'figure': figure}


def _num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _allreduce(measured):
    """', all-reduce 187.2 Gb/s (floor 150.0, passed)' of the link check's last measurement; '' when none."""
    if not measured or not _num(measured.get('busbw_gbit')):
        return ''
    return ', all-reduce %.1f Gb/s (floor %s, %s)' % (measured['busbw_gbit'], measured.get('floor_gbit'),
                                                      'passed' if measured.get('ok') else 'failed')


def _pcie(functions):
    """', PCIe x4 on 4 functions' of each RDMA function's PCIe link; a function narrower than its
    card is named, since it halves that twin's bandwidth: the board's wiring (an ASUS GX10's second
    endpoint runs x2 of x4, forums.developer.nvidia.com/t/367853), which the link check's all-reduce
    then shows. '' when sysfs gave none."""
    read = dict((dev, link) for dev, link in (functions or {}).items() if link and _num(link.get('width')))
    if not read:
        return ''
    narrow = sorted(dev for dev, link in read.items() if _num(link.get('max_width')) and link['width'] < link['max_width'])
    widths = sorted(set(link['width'] for link in read.values()))
    text = ', PCIe %s on %d functions' % ('/'.join('x%d' % w for w in widths), len(read))
    if narrow:
        text += ' (%s narrower than the card: %s)' % (
            ', '.join(narrow), ', '.join('x%d of x%d' % (read[d]['width'], read[d]['max_width']) for d in narrow))
    return text


def verdicts(nodes):
    """One verdict per rule: holds, fails or not measured, each with the figure it rests on.
    nodes: {host: the node's entry (memory, driver_version, override_present, earlyoom, link)}."""
    out = []
    hosts = sorted(nodes)
    drivers = dict((h, nodes[h].get('driver_version') or '') for h in hosts)
    if all(drivers.values()):
        bad = [h for h in hosts if drivers[h].split('.')[0] != DRIVER_BRANCH]
        out.append(_verdict('H1', 'fails' if bad else 'holds',
                            ', '.join('%s %s' % (h, drivers[h]) for h in hosts)))
    else:
        out.append(_verdict('H1', 'not measured', 'no driver version read'))

    memory = dict((h, nodes[h].get('memory') or {}) for h in hosts)
    measured = [h for h in hosts if _num(memory[h].get('total_gib'))]
    pools = [h for h in measured if _num(memory[h].get('cuda_total_gib'))]
    if pools:
        capped = [h for h in pools if memory[h]['cuda_total_gib'] < WHOLE_POOL_SHARE * memory[h]['total_gib']]
        out.append(_verdict('H2', 'fails' if capped else 'holds', ', '.join(
            '%s CUDA %.1f of %.1f GiB%s'
            % (h, memory[h]['cuda_total_gib'], memory[h]['total_gib'],
               ' (override file present)' if nodes[h].get('override_present') else '')
            for h in pools)))
    else:
        out.append(_verdict('H2', 'not measured', 'no CUDA view'))
    frees = [h for h in pools if _num(memory[h].get('cuda_free_gib')) and _num(memory[h].get('free_gib'))]
    if frees:
        apart = [h for h in frees if abs(memory[h]['cuda_free_gib'] - memory[h]['free_gib']) > CUDA_IS_MEMFREE_GIB]
        out.append(_verdict('H3', 'fails' if apart else 'holds', ', '.join(
            '%s CUDA free %.2f MemFree %.2f MemAvailable %.2f cache %.2f GiB'
            % (h, memory[h]['cuda_free_gib'], memory[h]['free_gib'], memory[h].get('available_gib', 0),
               memory[h].get('reclaimable_gib', 0)) for h in frees)))
    else:
        out.append(_verdict('H3', 'not measured', 'no CUDA free figure'))
    if measured:
        leaked = [h for h in measured if memory[h].get('leaked')]
        out.append(_verdict('H4', 'fails' if leaked else 'holds', ', '.join(
            '%s unaccounted %.2f GiB (threshold %s%s)'
            % (h, memory[h].get('unaccounted_gib', 0), memory[h].get('leak_threshold_gib'),
               ', engine running' if memory[h].get('gpu_workload') else '')
            for h in measured)))
        idle = [h for h in measured if not memory[h].get('gpu_workload') and _num(memory[h].get('available_gib'))]
        if len(idle) == len(measured) and len(idle) > 1:
            spread = max(memory[h]['available_gib'] for h in idle) - min(memory[h]['available_gib'] for h in idle)
            limit = BALANCE_SHARE * min(memory[h]['total_gib'] for h in idle)
            out.append(_verdict('H5', 'fails' if spread > limit else 'holds',
                                'available spread %.1f GiB, limit %.1f GiB' % (spread, limit)))
        else:
            out.append(_verdict('H5', 'not measured', 'an engine runs (balance is judged on idle nodes)'
                                if len(idle) < len(measured) else 'one node'))
    else:
        out.append(_verdict('H4', 'not measured', 'no meminfo read'))
        out.append(_verdict('H5', 'not measured', 'no meminfo read'))
    guards = dict((h, nodes[h].get('earlyoom')) for h in hosts if nodes[h].get('earlyoom') is not None)
    if guards:
        out.append(_verdict('H10', 'holds' if all(guards.values()) else 'fails', ', '.join(
            '%s earlyoom %s' % (h, 'running' if guards[h] else 'not running') for h in sorted(guards))))
    else:
        out.append(_verdict('H10', 'not measured', 'not read'))
    links = dict((h, nodes[h].get('link') or {}) for h in hosts)
    speeds = [h for h in hosts if _num(links[h].get('speed_mbps'))]
    if speeds:
        slow = [h for h in speeds if links[h]['speed_mbps'] < MIN_LINK_MBPS]
        # The link check's last all-reduce where the node's exporter serves it: one under its floor
        # (or over another transport) is the wrong wire as much as a slow port.
        failed = [h for h in speeds if (links[h].get('allreduce') or {}).get('ok') is False]
        out.append(_verdict('N5', 'fails' if slow or failed else 'holds', ', '.join(
            '%s %s Mb/s MTU %s%s%s' % (h, links[h]['speed_mbps'], links[h].get('mtu'), _pcie(links[h].get('pcie')),
                                       _allreduce(links[h].get('allreduce')))
            for h in speeds)))
        active = [h for h in speeds if links[h].get('hcas')]
        out.append(_verdict('N1', 'holds' if len(active) == len(speeds) else 'fails', ', '.join(
            '%s %s' % (h, ', '.join(links[h].get('hcas') or []) or 'no RoCE device') for h in speeds)))
    else:
        out.append(_verdict('N5', 'not measured', 'no link read'))
        out.append(_verdict('N1', 'not measured', 'no link read'))
    out.extend(serving_verdicts(nodes))
    return out


def serving_verdicts(nodes):
    """R1, N7 and H7 from what the head's running serving container answered (report.yml asks it
    with the image check's probe and the ptxas role's question; a node entry's `serving`): the Ray
    the Ray executor starts, the NCCL the engine loads judged as the image check judges it (its
    runtime version against the transport's floor, NCCL files baked into the image), and the
    assembler Triton runs for sm_121. Not measured where no serving container runs."""
    serving = [(h, nodes[h]['serving']) for h in sorted(nodes) if (nodes[h].get('serving') or {}).get('container')]
    if not serving:
        return [_verdict(rule, 'not measured', 'no serving container runs on the head')
                for rule in ('R1', 'N7', 'H7', 'V7')]
    host, found = serving[0]
    where = '%s %s (%s executor)' % (host, found['container'], found.get('executor') or 'ray')
    out = []
    probe = found.get('probe') or serving_image.parse_image_probe(found.get('probe_output'))
    if not probe:
        out.append(_verdict('R1', 'not measured', '%s: the probe printed no answer' % where))
        out.append(_verdict('N7', 'not measured', '%s: the probe printed no answer' % where))
    else:
        ray = probe.get('ray') or {}
        if found.get('executor') == 'mp':
            out.append(_verdict('R1', 'not measured', '%s: vLLM\'s own executor runs no Ray' % where))
        else:
            out.append(_verdict('R1', 'holds' if ray.get('version') else 'fails', '%s: %s' % (
                where, 'Ray %s' % ray['version'] if ray.get('version') else 'no Ray (%s)' % (ray.get('error') or 'no version'))))
        refusals = serving_image.image_refusals(probe, found.get('image') or found['container'], host, need_ray=False,
                                                ray_auth=False, transport=found.get('transport') or 'roce')
        out.append(_verdict('N7', 'fails' if refusals else 'holds', '%s: %s%s' % (
            where, serving_image.image_report(probe), ('; ' + ' '.join(refusals)) if refusals else '')))
    triton = found.get('triton') or {}
    if not triton or ('error' in triton and 'No module named' in triton['error']):
        out.append(_verdict('H7', 'not measured', '%s: %s' % (where, triton.get('error') or 'Triton not asked')))
    elif 'error' in triton:
        out.append(_verdict('H7', 'fails', '%s: Triton could not say which assembler it runs: %s' % (where, triton['error'])))
    else:
        out.append(_verdict('H7', 'holds' if triton.get('is_source') else 'fails', '%s: Triton %s runs %s (release %s) for sm_%s' % (
            where, triton.get('version'), triton.get('realpath') or triton.get('path'), triton.get('release'), triton.get('arch'))))
    out.append(_start_verdict(where, found))
    return out


def _start_verdict(where, found):
    """V7: the engine's last start by phase (its log, engine_start.phases) against the readiness
    wait the deploy gives it (the launch's readiness_timeout_s): a start slower than the wait is a
    deploy that gives up on an engine that would have come up."""
    start = found.get('start')
    wait = found.get('readiness_timeout_s')
    if not start:
        return _verdict('V7', 'not measured', '%s: its log holds no engine start' % where)
    if start.get('ready_after_s') is None:
        return _verdict('V7', 'not measured', '%s: %s' % (where, engine_start.summary(start)))
    if not _num(wait):
        return _verdict('V7', 'not measured', '%s: %s; no launch record gives the deploy\'s wait' % (
            where, engine_start.summary(start)))
    slow = start['ready_after_s'] > wait
    return _verdict('V7', 'fails' if slow else 'holds', '%s: %s, %s the deploy\'s wait of %d s%s' % (
        where, engine_start.summary(start), 'over' if slow else 'within', wait,
        ': raise the profile\'s readiness_timeout_s' if slow else ''))


def build(nodes, cluster, generated_at, addresses=False):
    """The report: its format, when, the cluster's name, every node's figures (redacted) and the
    verdicts."""
    nodes = dict(nodes)
    for host, node in list(nodes.items()):
        serving = dict(node.get('serving') or {})
        if 'probe_output' in serving:
            # The probe's answer, parsed; the container's other output (the engine's imports') left out.
            serving['probe'] = serving_image.parse_image_probe(serving.pop('probe_output'))
            nodes[host] = node = dict(node, serving=serving)
        if 'start_log' in serving:
            # The engine's last start by phase, not its log's lines.
            serving['start'] = engine_start.phases(serving.pop('start_log'))
            nodes[host] = node = dict(node, serving=serving)
        if 'exporter' in node:
            # The exporter's page, read as status.yml reads it: the link check's last all-reduce and
            # the watchdog's last probe, not the page.
            figures = status.node_figures(node['exporter']) or {}
            node = dict((k, v) for k, v in node.items() if k != 'exporter')
            node['link'] = dict(node.get('link') or {}, allreduce=figures.get('link'))
            node['watchdog'] = figures.get('watchdog')
            nodes[host] = node
    nodes = redact(nodes, addresses)
    return {'format': REPORT_FORMAT, 'generated_at': generated_at, 'cluster': cluster,
            'nodes': nodes, 'verdicts': verdicts(nodes)}


def markdown(report):
    """The page a person reads: the verdicts first, then each node's figures."""
    lines = ['# GB10 conformance report: %s' % report['cluster'], '',
             'Generated %s (format %s). Every figure was read on the node; serial numbers, MAC addresses '
             'and UUIDs are redacted.' % (report['generated_at'], report['format']), '',
             '| rule | verdict | figure |', '|---|---|---|']
    for item in report['verdicts']:
        lines.append('| %s | %s | %s |' % (item['rule'], item['verdict'], str(item['figure']).replace('|', '/')))
    for host in sorted(report['nodes']):
        bench = (report['nodes'][host].get('serving') or {}).get('benchmark')
        if bench and bench.get('levels'):
            lines += ['', '## A short benchmark through the front door', '',
                      '%s, prompts of %s tokens, %s generated per request, from the controller.'
                      % (bench.get('model'), bench.get('prefill_tokens'), bench.get('generate_tokens')), '',
                      '| concurrency | requests | output tok/s | mean TTFT s | mean TPOT ms | tok/s per request |',
                      '|---|---|---|---|---|---|']
            for level in bench['levels']:
                lines.append('| %s | %s | %s | %s | %s | %s |' % (
                    level.get('concurrency'), level.get('requests'), level.get('output_tok_per_s'),
                    level.get('mean_ttft_s'), level.get('mean_tpot_ms'), level.get('per_request_tok_per_s')))
    for host in sorted(report['nodes']):
        node = report['nodes'][host]
        lines += ['', '## %s' % host, '']
        memory = node.get('memory') or {}
        for key in MEMORY_FIGURES + ('processes_gib', 'locked_gib', 'gpu_held_gib', 'unaccounted_gib', 'leak_gib', 'leaked'):
            if key in memory:
                lines.append('- memory %s: %s' % (key, memory[key]))
        clean = (memory.get('baseline') or {}).get('reading')
        if clean:
            # Without the engine: the clean reading that made the node's baseline (module unified_memory).
            lines.append('- memory without the engine (the clean reading of %s): %s' % (
                memory['baseline'].get('recorded_at'), ', '.join('%s %s' % (k, clean[k]) for k in MEMORY_FIGURES if k in clean)))
        for key in sorted(k for k in node if k != 'memory'):
            lines.append('- %s: %s' % (key, node[key]))
    return '\n'.join(lines) + '\n'
