"""link_check_eval: the probe's figure against the floor, and NCCL's choice against the transport,
on the device machine's real output (tests/fixtures/nccl/README.md)."""
from ansible_collections.gb10.serving.plugins.modules import link_check_eval


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
