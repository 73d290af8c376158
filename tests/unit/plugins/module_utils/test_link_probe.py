"""All-reduce bus bandwidth as nccl-tests defines it (doc/PERFORMANCE.md), and the probe's output."""
import ast
import importlib.util
import os
import socket
import subprocess
import sys
import threading

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.link_probe import (
    LinkProbeError,
    below_floor,
    rated_floor,
    below_tcp_share,
    bus_bandwidth,
    gbit_per_s,
    parse_probe_output,
    tcp_reference,
)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("N5")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PROBE = os.path.join(TOP, 'roles', 'link_check', 'files', 'allreduce_probe.py')


def load_probe():
    spec = importlib.util.spec_from_file_location('allreduce_probe', PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # imports no torch: that happens in run()
    return module


def test_formula_of_nccl_tests():
    # algbw = S/t; busbw = algbw * 2(n-1)/n: 1 for n=2, 4/3 for n=3, 0 for one rank
    assert bus_bandwidth(1e9, 0.5, 2) == (2e9, 2e9)
    algbw, busbw = bus_bandwidth(3e9, 1.0, 3)
    assert algbw == 3e9 and busbw == pytest.approx(4e9)
    assert bus_bandwidth(8, 1.0, 1) == (8.0, 0.0)
    assert bus_bandwidth(1e9, 1.0, 8)[1] == pytest.approx(1e9 * 14 / 8)
    assert gbit_per_s(12.5e9) == 100.0


def test_formula_refuses_nonsense():
    with pytest.raises(LinkProbeError, match='seconds must be positive'):
        bus_bandwidth(1, 0, 2)
    with pytest.raises(LinkProbeError, match='world_size'):
        bus_bandwidth(1, 1, 0)
    with pytest.raises(LinkProbeError, match='nbytes'):
        bus_bandwidth(-1, 1, 2)


@pytest.mark.parametrize('nbytes,seconds,world', [
    (268435456, 0.0213, 2), (268435456, 0.0213, 3), (1, 1e-6, 1), (67108864, 0.0431265, 2), (10**9, 7.5, 7),
])
def test_probe_script_agrees_with_module_utils(nbytes, seconds, world):
    probe = load_probe()
    assert probe.bus_bandwidth(nbytes, seconds, world) == bus_bandwidth(nbytes, seconds, world)
    assert probe.PREFIX == 'GB10_LINK_PROBE '


def test_probe_arguments():
    probe = load_probe()
    args = probe.parse_args(['--backend', 'gloo', '--rank', '1', '--world-size', '2', '--master-addr', '10.0.0.1'])
    assert (args.size_mb, args.iters, args.warmup, args.master_port) == (256.0, 5, 2, 29555)
    # the TCP reference listens next to the rendezvous port unless told otherwise
    assert (args.tcp_mb, args.tcp_port) == (64.0, 29556)
    with pytest.raises(SystemExit):
        probe.parse_args(['--backend', 'gloo', '--rank', '0', '--world-size', '1', '--master-addr', 'x', '--tcp-mb', '-1'])
    with pytest.raises(SystemExit):
        probe.parse_args(['--backend', 'gloo', '--rank', '2', '--world-size', '2', '--master-addr', 'x'])
    with pytest.raises(SystemExit):
        probe.parse_args(['--backend', 'mpi', '--rank', '0', '--world-size', '1', '--master-addr', 'x'])


def test_device_machine_output(fixture_path):
    # the gloo loopback run on an NVIDIA GPU machine (tests/fixtures/nccl/README.md)
    results = []
    for rank in (0, 1):
        with open(fixture_path('nccl', 'device_gloo_loopback_rank%d.log' % rank)) as handle:
            results += parse_probe_output(handle.read())
    assert [result['rank'] for result in results] == [0, 1]
    result = results[0]
    busbw = bus_bandwidth(result['bytes'], result['seconds_per_iter'], result['world_size'])[1]
    assert busbw / 1e9 == pytest.approx(result['busbw_gbytes_s'])
    assert gbit_per_s(busbw) == pytest.approx(result['busbw_gbit_s'])
    assert below_floor(result, 10.0) is None
    assert 'below the floor of 100.0 Gb/s' in below_floor(result, 100.0)


def test_rated_floor_per_transport_and_hca_count():
    # A Spark's CX7 twin is a PCIe x4 link of ~100 Gb/s; the pair is rated 200, a ring
    # node's four HCAs are two per peer cable.
    assert rated_floor('roce', 2, 50, 0.6, 100) == (120.0, '0.6 x 200 Gb/s rated: 2 RoCE HCA(s) x 100 Gb/s')
    assert rated_floor('roce', 1, 50, 0.6, 100)[0] == 60.0
    assert rated_floor('roce_ring', 4, 50, 0.6, 100)[0] == 120.0
    # The role's ring default (0.4): NVIDIA's ring pass mark, 80 Gb/s, under the 111 a working ring measured.
    assert rated_floor('roce_ring', 4, 50, 0.4, 100)[0] == 80.0
    assert 'half of them per peer cable' in rated_floor('roce_ring', 4, 50, 0.6, 100)[1]
    # socket, no HCA list, no share, or a fixed floor above the share: the fixed floor.
    assert rated_floor('socket', 2, 2, 0.6, 100) == (2.0, None)


def test_a_bond_of_the_twins_is_rated_as_one_twin():
    # The field's working bond0 (two Sparks, the twins bonded) measured 109 Gb/s RDMA: rated as the
    # pair its NCCL_IB_HCA names (120) it was refused; as one twin (60) it passes, and a bond at
    # half its rate (~55) is still refused.
    assert rated_floor('roce', 2, 50, 0.6, 100)[0] > 109
    floor, why = rated_floor('roce', 2, 50, 0.6, 100, bonded=True)
    assert floor == 60.0 and 'a bond of the twins' in why
    assert 109 / 2 < floor < 109
    assert rated_floor('roce', 0, 50, 0.6, 100) == (50.0, None)
    assert rated_floor('roce', 2, 50, 0, 100) == (50.0, None)
    assert rated_floor('roce', 1, 80, 0.6, 100) == (80.0, None)


def test_probe_output_errors():
    with pytest.raises(LinkProbeError, match='no "GB10_LINK_PROBE" line'):
        parse_probe_output('NCCL INFO nothing\n')
    with pytest.raises(LinkProbeError, match='unreadable'):
        parse_probe_output('GB10_LINK_PROBE {not json\n')
    with pytest.raises(LinkProbeError, match='without seconds_per_iter'):
        parse_probe_output('GB10_LINK_PROBE {"rank": 0, "world_size": 1, "bytes": 4}\n')


def _free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_probe_gloo_two_ranks_on_loopback(tmp_path):
    """The real collective, two ranks over loopback with Gloo, 4 MiB: only where torch is importable
    (not in .venv; the serving image and an NVIDIA GPU machine have it)."""
    pytest.importorskip('torch')
    port = str(_free_port())
    env = dict(os.environ, GLOO_SOCKET_IFNAME='lo')
    procs = [subprocess.Popen([sys.executable, PROBE, '--backend', 'gloo', '--rank', str(rank), '--world-size', '2',
                               '--master-addr', '127.0.0.1', '--master-port', port, '--size-mb', '4',
                               '--iters', '2', '--warmup', '1', '--timeout-s', '60'],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, universal_newlines=True)
             for rank in (0, 1)]
    outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    results = parse_probe_output('\n'.join(outputs))
    assert [result['correct'] for result in results] == [True, True]
    assert results[0]['seconds_per_iter'] == results[1]['seconds_per_iter']
    assert results[0]['bytes'] == 4 * 1024 * 1024


def test_probe_is_self_contained():
    # it runs in the serving image, where the collection is not installed: stdlib and torch only
    with open(PROBE) as handle:
        tree = ast.parse(handle.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split('.')[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module.split('.')[0])
    assert names <= {'__future__', 'argparse', 'ctypes', 'datetime', 'json', 'os', 'socket', 'sys', 'time', 'torch'}, names


class ThreadedDist:
    """torch.distributed's barrier and all_gather_object for ranks that are threads of one process:
    the probe's TCP reference needs nothing else from it."""

    def __init__(self, world_size):
        self._barrier = threading.Barrier(world_size, timeout=60)
        self._slots = [None] * world_size
        self.rank = threading.local()

    def barrier(self):
        self._barrier.wait()

    def all_gather_object(self, gathered, mine):
        self._slots[self.rank.value] = mine
        self._barrier.wait()
        gathered[:] = list(self._slots)
        self._barrier.wait()


def _tcp_reference_on_loopback(world_size, tcp_port, listen_port=None):
    """Run the probe's TCP reference with every rank a thread over loopback; every rank's answer."""
    probe = load_probe()
    dist = ThreadedDist(world_size)
    answers = [None] * world_size
    errors = []

    def rank_main(rank):
        dist.rank.value = rank
        args = probe.parse_args(['--backend', 'gloo', '--rank', str(rank), '--world-size', str(world_size),
                                 '--master-addr', '127.0.0.1', '--tcp-mb', '2', '--tcp-port', str(tcp_port),
                                 '--timeout-s', '5'])
        if rank == 0 and listen_port is not None:
            args.tcp_port = listen_port  # rank 0 listens where the senders do not connect
        try:
            answers[rank] = probe.tcp_reference(args, dist)
        except Exception as exc:  # pylint: disable=broad-except
            errors.append(exc)

    threads = [threading.Thread(target=rank_main, args=(rank,)) for rank in range(world_size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    return answers


def test_tcp_reference_three_ranks_on_loopback():
    answers = _tcp_reference_on_loopback(3, _free_port())
    # every rank holds the same list: ranks 1 and 2 each sent 2 MiB to rank 0
    assert answers[0] == answers[1] == answers[2]
    reference = answers[0]
    assert reference['bytes'] == 2 * 1024 * 1024
    assert [peer['rank'] for peer in reference['peers']] == [1, 2]
    assert all(peer['gbit_s'] > 0 for peer in reference['peers'])
    result = {'rank': 0, 'world_size': 3, 'bytes': 1 << 20, 'seconds_per_iter': 1.0, 'tcp': reference}
    lowest, failures = tcp_reference(result)
    assert lowest == min(peer['gbit_s'] for peer in reference['peers']) and failures == []


def test_tcp_reference_reports_a_sender_that_cannot_connect():
    # rank 0 listens on another port than the one the sender is given: nothing accepts there
    answers = _tcp_reference_on_loopback(2, _free_port(), listen_port=_free_port())
    (peer,) = answers[0]['peers']
    assert peer['rank'] == 1 and 'gbit_s' not in peer
    assert peer['error'].startswith('TCP to 127.0.0.1:')
    result = {'rank': 0, 'world_size': 2, 'bytes': 1 << 20, 'seconds_per_iter': 1.0, 'tcp': answers[0]}
    lowest, failures = tcp_reference(result)
    assert lowest is None and len(failures) == 1 and failures[0].startswith('rank 1 (')
    # no figure, nothing to compare with: the role decides whether that is a problem
    assert below_tcp_share(result, 0.25) is None


def test_tcp_reference_reports_a_port_rank_0_cannot_take():
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))  # bound, not listening: rank 0's bind fails, a connect is refused
        answers = _tcp_reference_on_loopback(2, taken.getsockname()[1])
    first, second = answers[0]['peers']
    assert first['rank'] == 0 and first['error'].startswith('listen on 127.0.0.1:')
    assert second['rank'] == 1 and second['error'].startswith('TCP to 127.0.0.1:')
    assert answers[0] == answers[1]


def test_busbw_against_a_share_of_tcp():
    # 2 ranks, 1 GiB in 1 s: busbw = algbw = 8.59 Gb/s
    result = {'rank': 0, 'world_size': 2, 'bytes': 1 << 30, 'seconds_per_iter': 1.0,
              'tcp': {'bytes': 1 << 26, 'peers': [{'rank': 1, 'host': 'b', 'gbit_s': 40.0}]}}
    assert below_tcp_share(result, 0.2) is None  # 8.59 >= 0.2 x 40
    assert below_tcp_share(result, 0) is None  # 0: not compared
    message = below_tcp_share(result, 0.25)  # 8.59 < 10
    assert message == ('all-reduce busbw 8.6 Gb/s is below 0.25 x 40.0 Gb/s, the plain TCP figure between '
                       'the same cluster addresses')
    # a probe without the reference (older probe, or --tcp-mb 0) compares nothing
    del result['tcp']
    assert tcp_reference(result) == (None, []) and below_tcp_share(result, 0.25) is None
