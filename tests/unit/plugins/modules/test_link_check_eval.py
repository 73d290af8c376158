"""link_check_eval: the probe's figure against the floor, and NCCL's choice against the transport,
on an NVIDIA GPU machine's real output (tests/fixtures/nccl/README.md)."""
import pytest
import json

from ansible_collections.gb10.serving.plugins.modules import link_check_eval

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("N5")


def read(fixture_path, name):
    with open(fixture_path('nccl', name)) as handle:
        return handle.read()


def test_roce_profile_that_fell_back_to_sockets(run_module, fixture_path):
    failed, result = run_module(link_check_eval.main, {
        'output': read(fixture_path, 'device_h100_roce_profile_no_rdma.log'), 'transport': 'roce',
        'floor_gbit': 50, 'hcas': ['rocep1s0f1', 'roceP2p1s0f1']}, check_mode=True)
    assert not failed and result['changed'] is False
    assert result['probe']['backend'] == 'nccl' and result['probe']['world_size'] == 1
    # one rank: busbw 0 by the formula, below any floor
    assert result['busbw_gbit'] == 0.0 and 'below the floor of 50.0 Gb/s' in result['below_floor']
    assert result['nccl'] == ['vm pid 548 (rank 0): NET/Socket over eth0 (192.0.2.2)']
    (problem,) = result['nccl_problems']
    assert "profile's transport is roce" in problem


def test_socket_profile_agrees(run_module, fixture_path):
    failed, result = run_module(link_check_eval.main, {
        'output': read(fixture_path, 'device_h100_socket_profile.log'), 'transport': 'socket',
        'floor_gbit': 0, 'cluster_iface': 'eth0'})
    assert not failed and result['nccl_problems'] == [] and result['below_floor'] is None


def test_gloo_has_no_nccl_lines(run_module, fixture_path):
    failed, result = run_module(link_check_eval.main, {
        'output': read(fixture_path, 'device_gloo_loopback_rank1.log'), 'transport': 'socket', 'floor_gbit': 2})
    assert not failed and result['nccl'] == [] and result['nccl_problems'] == []
    assert result['probe']['rank'] == 1 and result['busbw_gbit'] == 12.449 and result['below_floor'] is None


def test_no_probe_line_fails_with_the_output(run_module):
    failed, result = run_module(link_check_eval.main, {
        'output': 'Traceback ...\nRuntimeError: connect() timed out\n', 'transport': 'socket', 'floor_gbit': 2})
    assert failed and 'no "GB10_LINK_PROBE" line' in result['msg'] and 'timed out' in result['msg']


def probe_line(**fields):
    result = {'probe': 'allreduce', 'backend': 'gloo', 'rank': 0, 'world_size': 2, 'bytes': 1 << 30,
              'seconds_per_iter': 1.0}
    result.update(fields)
    return 'GB10_LINK_PROBE ' + json.dumps(result) + '\n'


def test_a_wrong_wire_under_the_tcp_share(run_module):
    # Gloo at 8.6 Gb/s busbw while plain TCP between the cluster addresses gives 40 Gb/s: above the
    # socket floor of 2 Gb/s, but under a quarter of TCP
    output = probe_line(tcp={'bytes': 1 << 26, 'peers': [{'rank': 1, 'host': 'b', 'gbit_s': 40.0}]})
    failed, result = run_module(link_check_eval.main, {
        'output': output, 'transport': 'socket', 'floor_gbit': 2, 'tcp_share': 0.25})
    assert not failed and result['below_floor'] is None
    assert result['tcp_gbit'] == 40.0 and result['tcp_errors'] == []
    assert result['below_tcp_share'].startswith('all-reduce busbw 8.6 Gb/s is below 0.25 x 40.0 Gb/s')
    # the default share 0 compares nothing
    failed, result = run_module(link_check_eval.main, {'output': output, 'transport': 'socket', 'floor_gbit': 2})
    assert not failed and result['below_tcp_share'] is None and result['tcp_gbit'] == 40.0


def test_a_failed_tcp_reference_is_returned(run_module):
    output = probe_line(tcp={'bytes': 1 << 26, 'peers': [{'rank': 1, 'host': 'b', 'error': 'TCP to 10.0.0.1:29556: refused'}]})
    failed, result = run_module(link_check_eval.main, {
        'output': output, 'transport': 'socket', 'floor_gbit': 2, 'tcp_share': 0.25})
    assert not failed and result['tcp_gbit'] is None and result['below_tcp_share'] is None
    assert result['tcp_errors'] == ['rank 1 (b): TCP to 10.0.0.1:29556: refused']


def test_a_pair_at_half_its_rate_is_refused_with_both_figures(run_module):
    # One twin of the pair carrying everything gave 98 Gb/s busbw in a field report, both
    # 161. Both pass the fixed RoCE floor of 50; against 0.6 of the pair's 200 Gb/s only the second.
    def busbw_line(gbit):
        return probe_line(backend='gloo', seconds_per_iter=(1 << 30) * 8 / (gbit * 1e9))
    args = {'transport': 'roce', 'floor_gbit': 50, 'rated_share': 0.6, 'hcas': ['rocep1s0f1', 'roceP2p1s0f1']}
    failed, half = run_module(link_check_eval.main, dict(args, output=busbw_line(98)))
    assert not failed and half['floor_gbit'] == 120.0
    assert ('all-reduce busbw 98.0 Gb/s over 2 ranks' in half['below_floor']
            and 'below the floor of 120.0 Gb/s (0.6 x 200 Gb/s rated: 2 RoCE HCA(s) x 100 Gb/s)' in half['below_floor'])
    failed, full = run_module(link_check_eval.main, dict(args, output=busbw_line(161)))
    assert not failed and full['below_floor'] is None
    # One twin (mode single) is rated 100: its 98 Gb/s passes.
    failed, one = run_module(link_check_eval.main, dict(args, output=busbw_line(98), hcas=['rocep1s0f1']))
    assert not failed and one['floor_gbit'] == 60.0 and one['below_floor'] is None
