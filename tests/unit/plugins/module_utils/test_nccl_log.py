"""NCCL init lines -> the transport each rank took, against real captures (tests/fixtures/nccl/README.md
names the source of each file)."""
import pytest

from ansible_collections.gb10.serving.plugins.module_utils.nccl_log import (
    NcclLogError,
    check_transport,
    describe,
    engine_choice,
    parse_init_log,
)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("N5")


@pytest.fixture
def nccl_log(fixture_path):
    def read(name):
        with open(fixture_path('nccl', name)) as handle:
            return parse_init_log(handle.read())
    return read


def by_host(parsed):
    return {proc['host']: proc for proc in parsed['processes']}


def test_gx10_roce_devices_and_bootstrap(nccl_log):
    # GB10 (MSI EdgeXpert), NCCL 2.31.2, pinned NCCL_IB_HCA; the excerpt ends inside the OOB field
    parsed = nccl_log('gx10_vllm_nccl2312_roce.log')
    assert parsed['version'] == '2.31.2+cuda13.0'
    (proc,) = parsed['processes']
    assert (proc['host'], proc['pid']) == ('edgexpert-5ead', 454)
    assert proc['bootstrap'] == {'iface': 'enp1s0f0np0', 'address': '169.254.163.17'}
    assert proc['net'] == 'IB' and proc['net_kind'] == 'ib' and proc['net_source'] == 'devices'
    assert proc['devices'] == ['rocep1s0f0', 'roceP2p1s0f0']
    assert proc['link_layers'] == ['RoCE']
    assert check_transport(parsed, 'roce', hcas=['roceP2p1s0f0', 'rocep1s0f0']) == []
    assert check_transport(parsed, 'roce_ring') == []
    problems = check_transport(parsed, 'roce', hcas=['rocep1s0f0'])
    assert len(problems) == 1 and 'roceP2p1s0f0' in problems[0] and 'NCCL_IB_HCA' in problems[0]
    (problem,) = check_transport(parsed, 'socket')
    assert 'edgexpert-5ead pid 454' in problem and 'NET/IB over rocep1s0f0, roceP2p1s0f0 (RoCE)' in problem
    assert 'NCCL_IB_DISABLE=1' in problem


def test_dgx_spark_ray_worker_external_plugin_from_channels(nccl_log):
    # DGX Spark under vLLM + Ray: Ray's prefix on every line, HPC-X's IBext_v10 plugin, no
    # "Using network" line in the excerpt: the channels say which transport carried the data
    parsed = nccl_log('dgx_spark_vllm_ray_ibext.log')
    (proc,) = parsed['processes']
    assert (proc['host'], proc['pid'], proc['cuda_dev']) == ('spark-3995', 2981, 0)
    assert proc['net'] == 'IBext_v10' and proc['net_kind'] == 'ib' and proc['net_source'] == 'channels'
    assert proc['channel_via'] == ['NET/IBext_v10/0', 'NET/IBext_v10/1']
    assert proc['devices'] == ['rocep1s0f1', 'roceP2p1s0f1']
    assert proc['link_layers'] == []  # the plugin's virtual devices do not print it
    assert check_transport(parsed, 'roce', hcas=['rocep1s0f1', 'roceP2p1s0f1']) == []
    assert describe(proc) == 'spark-3995 pid 2981: NET/IBext_v10 over rocep1s0f1, roceP2p1s0f1'


def test_two_hosts_roce_with_nccl_tests_ranks(nccl_log):
    parsed = nccl_log('dgxh100_roce_nccl2193.log')
    assert parsed['versions'] == ['2.19.3+cuda12.3']
    hosts = by_host(parsed)
    assert sorted(hosts) == ['dgxh100-3', 'dgxh100-4']
    assert hosts['dgxh100-3']['ranks'] == [1]  # from nccl-tests' "#  Rank  1 Pid 2152176 on dgxh100-3"
    for proc in hosts.values():
        assert proc['net'] == 'IB' and proc['net_source'] == 'using network'
        assert proc['devices'] == ['mlx5_10', 'mlx5_11'] and proc['link_layers'] == ['RoCE']
    assert hosts['dgxh100-4']['bootstrap']['address'] == '11.1.128.136'
    assert check_transport(parsed, 'roce') == []
    problems = check_transport(parsed, 'socket')
    assert len(problems) == 2 and 'dgxh100-3 pid 2152176 (rank 1): NET/IB' in problems[0]


def test_socket_when_no_rdma_device(nccl_log):
    # "NET/IB : No device found." then sockets: what a wrong wire looks like in the log (N5)
    parsed = nccl_log('gcp_socket_no_ib_nccl278.log')
    hosts = by_host(parsed)
    assert sorted(hosts) == ['slurm-train-compute-0-0', 'slurm-train-compute-0-1']
    proc = hosts['slurm-train-compute-0-1']
    assert proc['ib_failed'] and proc['net'] == 'Socket' and proc['net_kind'] == 'socket'
    assert proc['socket_devices'] == [{'index': 0, 'iface': 'eth0', 'address': '10.0.0.33'}]
    assert proc['bootstrap'] == {'iface': 'eth0', 'address': '10.0.0.33'}  # old "[0]eth0:..." form
    problems = check_transport(parsed, 'roce')
    assert len(problems) == 2
    assert 'slurm-train-compute-0-0 pid 2139: NET/Socket over eth0 (10.0.0.34)' in problems[0]
    assert "profile's transport is roce" in problems[0] and 'no usable RoCE device' in problems[0]
    assert check_transport(parsed, 'socket', cluster_iface='eth0') == []
    wrong = check_transport(parsed, 'socket', cluster_iface='enp1s0f0np0')[0]
    assert 'not the cluster interface enp1s0f0np0' in wrong


def test_forced_socket_on_a_connectx_host(nccl_log):
    parsed = nccl_log('dgxa100_socket_forced_nccl2114.log')
    (proc,) = parsed['processes']
    assert proc['net'] == 'Socket' and not proc['ib_failed']
    assert proc['devices'] == ['enp225s0f1']
    assert parsed['version'] == '2.11.4+cuda11.4'
    assert check_transport(parsed, 'socket', cluster_iface='enp225s0f1') == []
    (problem,) = check_transport(parsed, 'roce')
    assert 'did not take its IB transport' in problem


def test_loopback_socket_is_refused(nccl_log):
    parsed = nccl_log('loopback_socket.log')
    (problem,) = check_transport(parsed, 'socket')
    assert 'lo (127.0.0.1)' in problem and 'rule N3' in problem


def test_channels_through_sockets_between_nodes(nccl_log):
    parsed = nccl_log('multinode_socket_channels.log')
    hosts = {(proc['host'], proc['pid']): proc for proc in parsed['processes']}
    assert hosts[('<cluster_name>', 926)]['net'] == 'Socket'
    assert hosts[('<cluster_name>', 926)]['channel_via'] == ['NET/Socket/3', 'P2P/IPC/read']
    # a process whose channels all stay on the node shows no network choice at all
    assert hosts[('<cluster_name>', 919)]['net'] is None
    problems = check_transport(parsed, 'socket')
    assert len(problems) == 2 and all('no network choice' in problem for problem in problems)


def test_device_machine_roce_profile_without_rdma_falls_back_to_socket(nccl_log):
    # captured on an NVIDIA GPU machine (H100, NCCL 2.28.9) with the env nccl_env renders for roce:
    # no RDMA device there, so NCCL says "Failed to initialize NET plugin IB" and takes sockets.
    # Note its "NET/IB : Using [RO]; OOB ..." line with no device: not an IB choice.
    parsed = nccl_log('device_h100_roce_profile_no_rdma.log')
    (proc,) = parsed['processes']
    assert parsed['version'] == '2.28.9+cuda13.0'
    assert proc['ranks'] == [0] and proc['nranks'] == 1
    assert proc['ib_failed'] and proc['ib_devices'] == []
    assert proc['net'] == 'Socket' and proc['devices'] == ['eth0']
    (problem,) = check_transport(parsed, 'roce', hcas=['rocep1s0f1', 'roceP2p1s0f1'])
    assert problem.startswith('vm pid 548 (rank 0): NET/Socket over eth0 (192.0.2.2)')
    assert 'NCCL_IB_HCA' in problem and 'rules N1, N5' in problem


@pytest.mark.rule("N1")
def test_device_machine_roce_profile_with_net_ib_fails_instead_of_falling_back(nccl_log, fixture_path):
    # The same machine kind (H200, NCCL 2.28.9, no RDMA device), the env nccl_env now renders for
    # roce: NCCL_NET=IB. NCCL finds no IB device and stops ("Failed to initialize any NET plugin",
    # exit status 1) instead of taking sockets; without NCCL_NET it took sockets and ran (N1, N5).
    with open(fixture_path('nccl', 'device_h200_roce_profile_net_ib_no_rdma.log')) as handle:
        text = handle.read()
    assert 'NCCL WARN Failed to initialize any NET plugin' in text and text.rstrip().endswith('exit status 1')
    (proc,) = nccl_log('device_h200_roce_profile_net_ib_no_rdma.log')['processes']
    assert proc['ib_failed'] and proc['net'] is None
    (fell_back,) = nccl_log('device_h200_roce_profile_no_net_no_rdma.log')['processes']
    assert fell_back['ib_failed'] and fell_back['net'] == 'Socket'


@pytest.mark.parametrize('name', ['device_h100_socket_profile.log', 'device_h100_default_env.log'])
def test_device_machine_socket(nccl_log, name):
    parsed = nccl_log(name)
    (proc,) = parsed['processes']
    assert proc['net'] == 'Socket' and proc['bootstrap']['iface'] == 'eth0'
    assert check_transport(parsed, 'socket', cluster_iface='eth0') == []
    assert len(check_transport(parsed, 'roce')) == 1


def test_no_nccl_lines():
    with pytest.raises(NcclLogError, match='NCCL_DEBUG=INFO'):
        parse_init_log('INFO 09-23 06:02:00 [base.py:261] warmup completed\n')
    with pytest.raises(NcclLogError, match='transport must be one of'):
        check_transport({'processes': []}, 'tcp')


def engine_log(fixture_path, *launches):
    """An engine.log as vllm_serve's launch script appends to it: each launch's start line, then
    what that launch printed (the named captures)."""
    text = ''
    for number, names in enumerate(launches):
        text += 'gb10-engine: starting 2026-11-25T10:0%d:00Z\n' % number
        for name in names:
            with open(fixture_path('nccl', name)) as handle:
                text += handle.read()
    return text


def test_engine_choice_reads_the_running_launch_alone(fixture_path):
    # A launch that fell back to sockets (real NCCL on an NVIDIA GPU machine), then one over RoCE
    # (DGX Spark under vLLM + Ray): only the running launch counts, both ways round.
    fell_back, roce = ['device_h100_roce_profile_no_rdma.log'], ['dgx_spark_vllm_ray_ibext.log']
    good = engine_choice(engine_log(fixture_path, fell_back, roce), 'roce')
    assert good['read'] and good['problems'] == []
    assert good['ranks'] == ['spark-3995 pid 2981: NET/IBext_v10 over rocep1s0f1, roceP2p1s0f1']
    assert good['note'].startswith('1 NCCL process(es), NCCL ')
    bad = engine_choice(engine_log(fixture_path, roce, fell_back), 'roce', hcas=['rocep1s0f1', 'roceP2p1s0f1'])
    (problem,) = bad['problems']
    assert problem.startswith('vm pid 548 (rank 0): NET/Socket over eth0 (192.0.2.2), but the profile\'s transport is roce')


@pytest.mark.rule("N5", "X3")
def test_engine_choice_reads_each_ranks_log_since_its_own_start(fixture_path):
    # vLLM's multi-node executor: each node's rank logs in its own container. An old launch on the
    # head that fell back to sockets does not count, and neither log hides the other's ranks.
    head = engine_log(fixture_path, ['device_h100_roce_profile_no_rdma.log'], ['dgx_spark_vllm_ray_ibext.log'])
    worker = engine_log(fixture_path, ['gx10_vllm_nccl2312_roce.log'])
    both = engine_choice([head, worker], 'roce')
    alone = engine_choice(head, 'roce'), engine_choice(worker, 'roce')
    assert sorted(both['ranks']) == sorted(alone[0]['ranks'] + alone[1]['ranks']) and len(both['ranks']) >= 2, both
    assert sorted(both['problems']) == sorted(alone[0]['problems'] + alone[1]['problems'])


def test_engine_choice_socket_on_the_cluster_interface(fixture_path):
    log = engine_log(fixture_path, ['device_h100_socket_profile.log'])
    assert engine_choice(log, 'socket', cluster_iface='eth0')['problems'] == []
    (problem,) = engine_choice(log, 'socket', cluster_iface='enp1s0f1np1')['problems']
    assert 'not the cluster interface enp1s0f1np1' in problem


def test_engine_choice_without_nccl_lines_is_read_false():
    # The CPU build's engine (Gloo): vLLM's own lines, no NCCL.
    log = ('gb10-engine: starting 2026-11-25T10:00:00Z\n'
           'INFO 11-25 10:00:05 [api_server.py:1885] vLLM API server version 0.11.0\n')
    result = engine_choice(log, 'socket', cluster_iface='eth0')
    assert not result['read'] and result['problems'] == [] and 'NCCL_DEBUG=INFO' in result['note']


def test_the_filter_names_a_transport_it_does_not_know():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gb10.serving.plugins.filter.nccl_engine_choice import nccl_engine_choice
    assert nccl_engine_choice('', 'socket', cluster_iface='', hcas=[])['read'] is False
    with pytest.raises(AnsibleFilterError, match='transport must be one of'):
        nccl_engine_choice('gb10-engine: starting\nh:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n', 'tcp')


@pytest.mark.rule("N1")
def test_nccl_over_an_infiniband_link_layer_is_not_the_roce_the_profile_wants(fixture_path):
    # The same two-host capture, its HCAs' link layer InfiniBand ("[0]mlx5_10:1/IB", as NCCL prints
    # an IB port): NCCL's IB transport, but not over RoCE, which roce and roce_ring expect.
    with open(fixture_path('nccl', 'dgxh100_roce_nccl2193.log')) as handle:
        parsed = parse_init_log(handle.read().replace(':1/RoCE', ':1/IB'))
    problems = check_transport(parsed, 'roce')
    assert len(problems) == 2 and all('InfiniBand link layer, not RoCE as roce expects (rule N1)' in p
                                      for p in problems), problems
    assert check_transport(parsed, 'roce_ring')[0].endswith('not RoCE as roce_ring expects (rule N1)')


# Init lines in NCCL's own shapes ("host:pid:tid [dev] NCCL INFO ..."), one process each, for the
# decisions the captures above leave one-sided (what the mutation run, bench/mutation.py, found).
def lines(host, pid, *messages):
    return ''.join('%s:%d:%d [0] NCCL INFO %s\n' % (host, pid, pid, message) for message in messages)


def test_sockets_with_no_ib_device_at_all_are_a_socket_choice_and_a_working_ib_is_not():
    quiet = parse_init_log(lines('a', 1, 'NET/Socket : Using [0]eth0:10.0.0.1<0>'))['processes'][0]
    assert (quiet['net'], quiet['net_source']) == ('Socket', 'devices')
    # IB devices found and not failed, sockets listed for bootstrap only: the IB transport.
    both = parse_init_log(lines('b', 2, 'NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:10.0.0.2<0>',
                                'NET/Socket : Using [0]eth0:10.0.0.2<0>'))['processes'][0]
    assert (both['net'], both['net_kind'], both['devices']) == ('IB', 'ib', ['rocep1s0f1'])
    # IB devices listed, then the plugin failed: NCCL went on over sockets.
    failed = parse_init_log(lines('c', 3, 'NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:10.0.0.3<0>',
                                  'Failed to initialize NET plugin IB', 'NET/Socket : Using [0]eth0:10.0.0.3<0>'))
    assert failed['processes'][0]['net'] == 'Socket'


def test_a_network_other_than_ib_and_sockets_is_named_for_every_rank():
    # A NET plugin of another name (here a made-up one) under the RoCE transport, on two processes:
    # each is named with what it took and the transport wanted.
    parsed = parse_init_log(lines('a', 1, 'Using network Plugin9') + lines('b', 2, 'Using network Plugin9'))
    problems = check_transport(parsed, 'roce')
    assert problems == ["a pid 1: NET/Plugin9, but the profile's transport is roce (rule N5)",
                        "b pid 2: NET/Plugin9, but the profile's transport is roce (rule N5)"]


def test_a_process_that_logged_no_choice_is_named():
    parsed = parse_init_log(lines('a', 7, 'NCCL version 2.31.2+cuda13.0'))
    assert check_transport(parsed, 'roce') == [
        'a pid 7: no network choice in its log; NCCL_DEBUG=INFO output of the whole init is needed to tell the '
        'transport (rule N5)']


def test_sockets_on_loopback_by_name_or_address_and_on_another_interface_are_each_refused():
    parsed = parse_init_log(lines('a', 1, 'NET/Socket : Using [0]lo:::1<0>')
                            + lines('b', 2, 'NET/Socket : Using [0]eth9:127.0.0.2<0>')
                            + lines('c', 3, 'NET/Socket : Using [0]bond0:10.0.0.3<0>')
                            + lines('d', 4, 'NET/Socket : Using [0]enp1s0f1np1:10.0.0.4<0>'))
    problems = check_transport(parsed, 'socket', cluster_iface='enp1s0f1np1')
    assert [p.split(':', 1)[0] for p in problems] == ['a pid 1', 'b pid 2', 'c pid 3'], problems
    assert 'loopback' in problems[0] and 'loopback' in problems[1]
    assert 'not the cluster interface enp1s0f1np1' in problems[2]
    # A socket profile whose rank took IB: the explicit choice did not reach it (N4).
    (ib,) = check_transport(parse_init_log(lines('e', 5, 'Using network IB')), 'socket')
    assert ib.startswith('e pid 5: NET/IB, but the profile\'s transport is socket') and 'rule N4' in ib


def test_the_version_is_the_first_logged_and_a_later_line_does_not_change_it():
    parsed = parse_init_log(lines('a', 1, 'NCCL version 2.31.2+cuda13.0', 'Using network IB')
                            + lines('b', 2, 'NCCL version 2.28.9+cuda12.9', 'Using network IB'))
    assert parsed['version'] == '2.31.2+cuda13.0' and parsed['versions'] == ['2.31.2+cuda13.0', '2.28.9+cuda12.9']
