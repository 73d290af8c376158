# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What NCCL chose, read from what each rank prints at init with NCCL_DEBUG=INFO, and whether that
is the profile's transport (rule N5: NCCL on the wrong wire fails nothing, it is only slow).

Lines read (any prefix before "host:pid:tid [dev] NCCL INFO" is ignored, e.g. Ray's
"(RayWorkerWrapper pid=2981, ip=...) "); formats of NCCL 2.4 through 2.31, from the captures under
tests/fixtures/nccl/:
  NET/IB : Using [0]rocep1s0f0:1/RoCE [1]roceP2p1s0f0:1/RoCE [RO]; OOB enp1s0f0np0:169.254.163.17<0>
  NET/IB : No device found.            Failed to initialize NET plugin IB      (IB not usable)
  NET/IB : Made virtual device [0] name=rocep1s0f1 speed=200000 ndevs=1      (external IB plugin)
  NET/Socket : Using [0]enp1s0f0np0:10.0.0.1<0>
  Using network IB | Using network Socket | Using network IBext_v10 | Assigned NET plugin Socket to comm
  Channel 09/0 : 1[0] -> 0[0] [send] via NET/IBext_v10/1           (the transport a channel took)
  ncclCommInitRank comm 0x... rank 0 nranks 2 ...                    (which rank the process is)
  NCCL version 2.19.3+cuda12.3 | NCCL INFO NCCL version 2.28.9+cuda13.0
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# "host:pid:tid [cudaDev] NCCL INFO message", after whatever prefix a launcher adds
_LINE = re.compile(r'(?:^|[\s\])])(?P<host>[^\s:()]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] '
                   r'NCCL (?P<level>INFO|WARN) (?P<msg>.*?)\s*$')
_VERSION = re.compile(r'NCCL version (?P<version>\d+\.\d+\.\d+\S*)')
_IB_USING = re.compile(r'^NET/IB\s*:\s*Using\s+(?P<rest>.*)$')
_IB_DEV = re.compile(r'\[(?P<index>\d+)\](?P<name>[^\s:\[\]]+):(?P<port>\d+)/(?P<layer>RoCE|IB)\b')
_IB_VIRTUAL = re.compile(r'^NET/IB\s*:\s*Made virtual device \[(?P<index>\d+)\] name=(?P<name>\S+)')
_IB_FAILED = re.compile(r'^(?:NET/IB\s*:\s*No device found|Failed to initialize NET plugin IB)')
_SOCKET_USING = re.compile(r'^NET/Socket\s*:\s*Using\s+(?P<rest>.*)$')
_SOCKET_DEV = re.compile(r'\[(?P<index>\d+)\](?P<iface>[^\s:\[\]]+):(?P<address>[^<\s]+)<\d+>')
_BOOTSTRAP = re.compile(r'^Bootstrap\s*:\s*Using\s+(?:\[\d+\])?(?P<iface>[^\s:]+):(?P<address>[^<\s]+)<\d+>')
_NETWORK = re.compile(r'^(?:Using network (?P<using>\S+)|Assigned NET plugin (?P<assigned>\S+) to comm)')
_CHANNEL = re.compile(r'^Channel \d+/\d+ : .* via (?P<via>\S+)')
_RANK = re.compile(r'^ncclCommInitRank\w* comm \S+ rank (?P<rank>\d+) nranks (?P<nranks>\d+)')
# nccl-tests' banner: "#  Rank  1 Pid 2152176 on  dgxh100-3 device  0 [0xd1] ..."
_TESTS_RANK = re.compile(r'^#\s+Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)')

TRANSPORTS = ('roce', 'roce_ring', 'socket')


class NcclLogError(ValueError):
    """Text that holds no NCCL init lines (NCCL_DEBUG=INFO missing, or the init never ran)."""


def _process(processes, host, pid):
    key = (host, int(pid))
    if key not in processes:
        processes[key] = {
            'host': host, 'pid': int(pid), 'cuda_dev': None, 'ranks': [], 'nranks': None,
            'version': None, 'bootstrap': None, 'ib_devices': [], 'ib_failed': False,
            'socket_devices': [], 'network': None, 'channel_via': [],
        }
    return processes[key]


def _add_unique(items, item):
    if item not in items:
        items.append(item)


def _read_message(proc, msg):
    """Fold one "NCCL INFO" message into its process's record."""
    match = _VERSION.search(msg)
    if match and msg.startswith('NCCL version'):
        proc['version'] = match.group('version')
        return
    match = _BOOTSTRAP.match(msg)
    if match:
        proc['bootstrap'] = {'iface': match.group('iface'), 'address': match.group('address')}
        return
    if _IB_FAILED.match(msg):
        proc['ib_failed'] = True
        return
    match = _IB_USING.match(msg)
    if match:
        for dev in _IB_DEV.finditer(match.group('rest').split(';')[0]):
            _add_unique(proc['ib_devices'], {'index': int(dev.group('index')), 'name': dev.group('name'),
                                             'port': int(dev.group('port')), 'link_layer': dev.group('layer')})
        return
    match = _IB_VIRTUAL.match(msg)
    if match:
        # an external IB plugin names its devices this way; the link layer is not printed
        _add_unique(proc['ib_devices'], {'index': int(match.group('index')), 'name': match.group('name'),
                                         'port': None, 'link_layer': None})
        return
    match = _SOCKET_USING.match(msg)
    if match:
        for dev in _SOCKET_DEV.finditer(match.group('rest')):
            _add_unique(proc['socket_devices'], {'index': int(dev.group('index')), 'iface': dev.group('iface'),
                                                 'address': dev.group('address')})
        return
    match = _NETWORK.match(msg)
    if match:
        proc['network'] = match.group('using') or match.group('assigned')
        return
    match = _CHANNEL.match(msg)
    if match:
        _add_unique(proc['channel_via'], match.group('via'))
        return
    match = _RANK.match(msg)
    if match:
        _add_unique(proc['ranks'], int(match.group('rank')))
        proc['nranks'] = int(match.group('nranks'))


def _network_kind(name):
    if not name:
        return None
    if name.lower() == 'socket':
        return 'socket'
    if name.upper().startswith('IB'):  # IB, IBext, IBext_v10: the IB verbs transport (RoCE or InfiniBand)
        return 'ib'
    return name.lower()


def _summarize(proc):
    """The network a process took, how sure that is, and the devices behind it."""
    via_net = [via.split('/')[1] for via in proc['channel_via'] if via.startswith('NET/') and '/' in via[4:]]
    if proc['network']:
        network, source = proc['network'], 'using network'
    elif via_net:
        network, source = via_net[0], 'channels'
    elif proc['ib_devices'] and not proc['ib_failed']:
        network, source = 'IB', 'devices'
    elif proc['socket_devices'] and (proc['ib_failed'] or not proc['ib_devices']):
        network, source = 'Socket', 'devices'
    else:
        network, source = None, None
    kind = _network_kind(network)
    if kind == 'ib':
        devices = [dev['name'] for dev in proc['ib_devices']]
        layers = sorted(set(dev['link_layer'] for dev in proc['ib_devices'] if dev['link_layer']))
    elif kind == 'socket':
        devices = [dev['iface'] for dev in proc['socket_devices']]
        layers = []
    else:
        devices, layers = [], []
    proc['ranks'].sort()
    proc.update({'net': network, 'net_kind': kind, 'net_source': source, 'devices': devices,
                 'link_layers': layers, 'channel_via': sorted(proc['channel_via'])})
    return proc


def parse_init_log(text):
    """Every NCCL process in text (one or many ranks' output, in any order), keyed by host and pid:
    {'version': first NCCL version seen, 'processes': [{host, pid, ranks, nranks, net, net_kind
    ('ib'|'socket'|None), net_source, devices, link_layers, ib_devices, ib_failed, socket_devices,
    bootstrap, channel_via, ...}]}. Raises NcclLogError when no NCCL INFO line is there."""
    processes = {}
    versions = []
    tests_ranks = {}
    seen = False
    for line in (text or '').splitlines():
        match = _LINE.search(line)
        if match:
            seen = True
            proc = _process(processes, match.group('host'), match.group('pid'))
            if proc['cuda_dev'] is None:
                proc['cuda_dev'] = int(match.group('dev'))
            _read_message(proc, match.group('msg'))
            if proc['version']:
                _add_unique(versions, proc['version'])
            continue
        match = _TESTS_RANK.match(line.strip())
        if match:
            tests_ranks[(match.group('host'), int(match.group('pid')))] = int(match.group('rank'))
            continue
        match = _VERSION.search(line)
        if match and line.strip().startswith('NCCL version'):
            _add_unique(versions, match.group('version'))
    if not seen:
        raise NcclLogError('no "NCCL INFO" line found: start the ranks with NCCL_DEBUG=INFO and keep '
                           'their output from the start of the NCCL init')
    for key, rank in tests_ranks.items():
        if key in processes:
            _add_unique(processes[key]['ranks'], rank)
    procs = [_summarize(processes[key]) for key in sorted(processes)]
    return {'version': versions[0] if versions else None, 'versions': versions, 'processes': procs}


def describe(proc):
    """One line for a report: "spark-3995 pid 2981 (rank 1): NET/IB over rocep1s0f1, ... (RoCE)"."""
    who = '%s pid %d' % (proc['host'], proc['pid'])
    if proc['ranks']:
        who += ' (rank %s)' % ','.join(str(rank) for rank in proc['ranks'])
    if not proc['net']:
        return '%s: no network choice in its log' % who
    text = '%s: NET/%s' % (who, proc['net'])
    if proc['net_kind'] == 'socket':
        text += ' over ' + (', '.join('%s (%s)' % (dev['iface'], dev['address']) for dev in proc['socket_devices'])
                            or 'an interface not named in the log')
    elif proc['devices']:
        text += ' over ' + ', '.join(proc['devices'])
    if proc['link_layers']:
        text += ' (%s)' % '/'.join(proc['link_layers'])
    return text


def check_transport(parsed, transport, cluster_iface=None, hcas=None):
    """Problems (an empty list when none) between what each NCCL process took and the profile's
    transport: roce / roce_ring want NCCL's IB transport over RoCE devices (those of hcas when
    given), socket wants NCCL's sockets on cluster_iface (never loopback). Each names the host,
    pid and rank, what NCCL took, and the likely cause."""
    if transport not in TRANSPORTS:
        raise NcclLogError('transport must be one of %s, got %r' % (', '.join(TRANSPORTS), transport))
    problems = []
    for proc in parsed['processes']:
        seen = describe(proc)
        kind = proc['net_kind']
        if kind is None:
            problems.append('%s; NCCL_DEBUG=INFO output of the whole init is needed to tell the transport '
                            '(rule N5)' % seen)
            continue
        if transport in ('roce', 'roce_ring'):
            if kind == 'socket':
                cause = ('NCCL found no usable RoCE device (its log says NET/IB: no device or a failed IB '
                         'plugin)' if proc['ib_failed'] else 'NCCL did not take its IB transport')
                problems.append(
                    '%s, but the profile\'s transport is %s: %s. Check NCCL_IB_HCA against '
                    'ibdev2netdev, the RoCE port state (ACTIVE) and NCCL_IB_DISABLE=0 in the env file '
                    '(rules N1, N5: a socket fallback is slow and fails nothing)' % (seen, transport, cause))
                continue
            if kind != 'ib':
                problems.append('%s, but the profile\'s transport is %s (rule N5)' % (seen, transport))
                continue
            if 'IB' in proc['link_layers'] and 'RoCE' not in proc['link_layers']:
                problems.append('%s: InfiniBand link layer, not RoCE as %s expects (rule N1)' % (seen, transport))
            if hcas:
                other = [dev for dev in proc['devices'] if dev not in hcas]
                if other:
                    problems.append('%s: device(s) %s are not in NCCL_IB_HCA %s (rule N1)'
                                    % (seen, ', '.join(other), ','.join(hcas)))
        else:
            if kind != 'socket':
                problems.append(
                    '%s, but the profile\'s transport is socket: NCCL_IB_DISABLE=1 / NCCL_NET=Socket '
                    'from the env file did not reach this rank (rule N4: the choice is explicit)' % seen)
                continue
            for dev in proc['socket_devices']:
                if dev['iface'] == 'lo' or dev['address'].startswith('127.'):
                    problems.append('%s: loopback is no link between nodes; set NCCL_SOCKET_IFNAME to the '
                                    'cluster interface (rule N3)' % seen)
                elif cluster_iface and dev['iface'] != cluster_iface:
                    problems.append('%s: not the cluster interface %s (a management NIC gave ~6 tok/s at '
                                    'TP=3; rules N3, N5)' % (seen, cluster_iface))
    return problems


# What the launch script prints first (roles/vllm_serve/templates/launch.sh.j2): the engine's log
# is appended to across launches, and only the running launch's lines count.
ENGINE_START_MARK = 'gb10-engine: starting'


def _since_start(log_text):
    """The lines of one engine log since its launch script's last start line."""
    lines = (log_text or '').splitlines()
    starts = [index for index, line in enumerate(lines) if line.startswith(ENGINE_START_MARK)]
    return lines[starts[-1]:] if starts else lines


def engine_choice(log_text, transport, cluster_iface=None, hcas=None):
    """NCCL's choice in a serving engine's log since its last start (rule N5, after the launch); a
    list of logs is one per rank's node (vLLM's multi-node executor: each rank logs in its own
    node's container), each read since its own last start:
    {'read': whether NCCL INFO lines were there, 'ranks': one describe() line per NCCL process,
    'problems': check_transport()'s, 'note': one line for a summary}. No NCCL line is no problem
    (the CPU build runs Gloo; a GPU engine whose workers did not get NCCL_DEBUG says so in the
    note); a choice other than the transport is."""
    texts = log_text if isinstance(log_text, (list, tuple)) else [log_text]
    current = '\n'.join(line for text in texts for line in _since_start(text))
    try:
        parsed = parse_init_log(current)
    except NcclLogError:
        return {'read': False, 'ranks': [], 'problems': [],
                'note': 'no NCCL init line in any rank\'s log since its start: Gloo (the CPU build), '
                        'replicas at TP 1 with no group across nodes (data parallelism of a dense model), '
                        'or NCCL_DEBUG=INFO from the env file did not reach the ranks'}
    ranks = [describe(proc) for proc in parsed['processes']]
    problems = check_transport(parsed, transport, cluster_iface=cluster_iface, hcas=hcas)
    note = '%s NCCL process(es), NCCL %s: %s' % (len(ranks), parsed['version'] or 'version not logged', '; '.join(ranks))
    return {'read': True, 'ranks': ranks, 'problems': problems, 'note': note}
