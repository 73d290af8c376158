"""All-reduce bus bandwidth as nccl-tests defines it (doc/PERFORMANCE.md), and the probe's output."""
import ast
import importlib.util
import os
import socket
import subprocess
import sys

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.link_probe import (
    LinkProbeError,
    below_floor,
    bus_bandwidth,
    gbit_per_s,
    parse_probe_output,
)

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
    with pytest.raises(SystemExit):
        probe.parse_args(['--backend', 'gloo', '--rank', '2', '--world-size', '2', '--master-addr', 'x'])
    with pytest.raises(SystemExit):
        probe.parse_args(['--backend', 'mpi', '--rank', '0', '--world-size', '1', '--master-addr', 'x'])


def test_device_machine_output(fixture_path):
    # the gloo loopback run on the device machine (tests/fixtures/nccl/README.md)
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
    (not in .venv; the serving image and the device machine have it)."""
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
    assert names <= {'__future__', 'argparse', 'datetime', 'json', 'socket', 'sys', 'time', 'torch'}, names
