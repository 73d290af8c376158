"""The simulation's NCCL stand-in (tests/sim/images/serving/gb10_sim_platform/nccl_standin.py)
prints what the collection's own reader (module_utils/nccl_log.py) takes for NCCL's choice: IB
over the twins' HCAs when the container reaches the RDMA devices, NCCL's silent socket fallback
when it does not, sockets when the env file chose them (rules N1, N4, N5)."""
import pytest
import importlib.util
import os

from ansible_collections.gb10.serving.plugins.module_utils.nccl_log import engine_choice

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("N1")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location(
    'nccl_standin', os.path.join(TOP, 'tests', 'sim', 'images', 'serving', 'gb10_sim_platform', 'nccl_standin.py'))
standin = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(standin)

ROCE_ENV = {'NCCL_DEBUG': 'INFO', 'NCCL_IB_DISABLE': '0', 'NCCL_IB_HCA': 'roceP2p1s0f1,rocep1s0f1',
            'NCCL_NET_PLUGIN': 'none', 'NCCL_SOCKET_IFNAME': 'enp1s0f1np1'}
HCAS = ['roceP2p1s0f1', 'rocep1s0f1']


def engine_log(env, can_use_rdma):
    """Two ranks' lines as Ray carries them into the engine's log."""
    lines = ['gb10-engine: starting']
    for host, pid in (('gb10-sim-spark1', 301), ('gb10-sim-spark2', 402)):
        for line in standin.init_lines(env, can_use_rdma, host, pid, lambda iface: '172.30.211.11'):
            lines.append('(RayWorkerWrapper pid=%d, ip=172.30.211.11) %s:%d:%d [0] NCCL INFO %s'
                         % (pid, host, pid, pid, line))
    return '\n'.join(lines)


def test_ib_over_both_twins_when_the_container_reaches_the_devices():
    choice = engine_choice(engine_log(ROCE_ENV, True), 'roce', 'enp1s0f1np1', HCAS)
    assert choice['problems'] == []
    assert choice['ranks'] == ['gb10-sim-spark1 pid 301: NET/IB over roceP2p1s0f1, rocep1s0f1 (RoCE)',
                               'gb10-sim-spark2 pid 402: NET/IB over roceP2p1s0f1, rocep1s0f1 (RoCE)']


def test_the_silent_socket_fallback_without_them_is_a_problem_naming_its_cause():
    choice = engine_choice(engine_log(ROCE_ENV, False), 'roce', 'enp1s0f1np1', HCAS)
    assert len(choice['problems']) == 2
    assert ("NET/Socket over enp1s0f1np1 (172.30.211.11), but the profile's transport is roce: NCCL found no "
            "usable RoCE device") in choice['problems'][0]


def test_sockets_chosen_in_the_env_file_are_sockets():
    env = dict(ROCE_ENV, NCCL_IB_DISABLE='1', NCCL_NET='Socket')
    choice = engine_choice(engine_log(env, True), 'socket', 'enp1s0f1np1', [])
    assert choice['problems'] == [] and all('NET/Socket over enp1s0f1np1' in rank for rank in choice['ranks'])
