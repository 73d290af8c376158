import ipaddress
import shutil

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.roce import (
    RoceError,
    compare_nodes,
    covering_network,
    gid_ipv4,
    nccl_env,
    parse_ip_addr,
    parse_rate,
    plan,
    rdma_limits,
    read_netdevs,
    read_rdma,
)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("N1", "N2", "N3", "N5", "N6")


def facts(fixture_path, tree, cluster_ip, transport='roce', **kwargs):
    root = fixture_path('sysfs', *tree.split('/'))
    with open(fixture_path('sysfs', *(tree.split('/') + ['ip-addr.json']))) as handle:
        addresses = parse_ip_addr(handle.read())
    ports = read_rdma(root)
    names = set(addresses)
    for port in ports:
        names.update(gid['ndev'] for gid in port['gids'])
    return plan(ports, addresses, read_netdevs(root, sorted(names)), cluster_ip, transport,
                **kwargs)


def test_sysfs_value_formats():
    assert gid_ipv4('0000:0000:0000:0000:0000:ffff:c0a8:6401') == '192.168.100.1'
    assert gid_ipv4('fe80:0000:0000:0000:4ebb:47ff:fe2e:0111') is None
    assert parse_rate('200 Gb/sec (4X HDR)') == 200.0
    assert parse_rate(None) is None


def test_read_rdma_sees_states_types_and_netdevs(fixture_path):
    ports = dict((p['device'], p) for p in read_rdma(fixture_path('sysfs', 'direct-pair', 'spark1')))
    assert set(ports) == {'rocep1s0f0', 'rocep1s0f1', 'roceP2p1s0f0', 'roceP2p1s0f1'}
    up = ports['rocep1s0f1']
    assert up['active'] and up['rate_gbps'] == 200.0 and up['netdev'] == 'enp1s0f1np1'
    assert [(g['index'], g['type'], g['ipv4']) for g in up['gids']] == [
        (0, 'IB/RoCE v1', None), (1, 'RoCE v2', None),
        (2, 'IB/RoCE v1', '192.168.100.10'), (3, 'RoCE v2', '192.168.100.10')]
    assert not ports['rocep1s0f0']['active']


def test_read_rdma_reads_each_functions_pcie_link(fixture_path, tmp_path):
    # A DGX Spark's four ConnectX-7 functions each negotiate Gen5 x4 (the fixture's files, as sysfs
    # writes them); an ASUS GX10's second endpoint x2 of x4 (forums.developer.nvidia.com/t/367853).
    root = tmp_path / 'sys'
    shutil.copytree(fixture_path('sysfs', 'direct-pair', 'spark1'), str(root))
    ports = dict((p['device'], p) for p in read_rdma(str(root)))
    assert [ports[d]['pcie'] for d in sorted(ports)] == [
        {'speed': '32.0 GT/s PCIe', 'width': 4, 'max_speed': '32.0 GT/s PCIe', 'max_width': 4}] * 4
    (root / 'class/infiniband/roceP2p1s0f1/device/current_link_width').write_text('2\n')
    narrowed = dict((p['device'], p) for p in read_rdma(str(root)))
    assert (narrowed['roceP2p1s0f1']['pcie']['width'], narrowed['roceP2p1s0f1']['pcie']['max_width']) == (2, 4)
    assert narrowed['rocep1s0f1']['pcie']['width'] == 4
    # A tree without the link files (a virtual function, an older kernel) says none rather than guessing.
    (root / 'class/infiniband/rocep1s0f1/device/current_link_width').unlink()
    assert dict((p['device'], p) for p in read_rdma(str(root)))['rocep1s0f1']['pcie'] is None


def test_direct_pair_gets_gid_3_both_halves_and_roce_env(fixture_path):
    result = facts(fixture_path, 'direct-pair/spark1', '192.168.100.10')
    assert result['problems'] == []
    assert result['hcas'] == ['roceP2p1s0f1', 'rocep1s0f1']
    assert result['gid_index'] == 3
    env = result['env']
    assert env['NCCL_IB_HCA'] == 'roceP2p1s0f1,rocep1s0f1'
    assert env['NCCL_IB_GID_INDEX'] == '3'
    assert env['NCCL_NET_GDR_LEVEL'] == '0'  # N2
    assert env['NCCL_IB_DISABLE'] == '0' and env['NCCL_NET_PLUGIN'] == 'none'
    assert env['NCCL_IB_ROCE_VERSION_NUM'] == '2' and env['NCCL_IB_TIMEOUT'] == '22'
    for name in ('NCCL_SOCKET_IFNAME', 'GLOO_SOCKET_IFNAME', 'TP_SOCKET_IFNAME', 'UCX_NET_DEVICES',
                 'OMPI_MCA_btl_tcp_if_include'):
        assert env[name] == 'enp1s0f1np1'  # N3
    assert env['VLLM_HOST_IP'] == '192.168.100.10'


def test_bonded_pair_detects_gid_5_not_the_usual_3(fixture_path):
    result = facts(fixture_path, 'bonded-pair/spark2', '10.0.0.2')
    assert result['problems'] == []
    assert result['cluster_iface'] == 'bond0'
    assert result['gid_index'] == 5  # an IPv6 address on bond0 takes 2 and 3
    assert result['hcas'] == ['roceP2p1s0f0', 'rocep1s0f0']


def test_ring_uses_addr_range_and_no_global_gid(fixture_path):
    result = facts(fixture_path, 'ring3/spark1', '10.10.0.1', 'roce_ring')
    assert result['problems'] == []
    env = result['env']
    assert 'NCCL_IB_GID_INDEX' not in env  # N6: per-connection GIDs
    assert env['NCCL_IB_ADDR_RANGE'] == '192.168.96.0/20'
    assert ipaddress.IPv4Network('192.168.106.0/24').subnet_of(
        ipaddress.IPv4Network(env['NCCL_IB_ADDR_RANGE']))
    assert env['NCCL_IB_SUBNET_AWARE_ROUTING'] == '1' and env['NCCL_IB_MERGE_NICS'] == '0'
    assert env['NCCL_NET_GDR_LEVEL'] == '0' and env['NCCL_NET_PLUGIN'] == 'none'
    assert env['GLOO_SOCKET_IFNAME'] == 'enP7s7'  # coordination over the 10 GbE port
    assert len(result['hcas']) == 4
    assert sorted(link['network'] for link in result['ring_links']) == [
        '192.168.101.0/24', '192.168.102.0/24', '192.168.103.0/24', '192.168.104.0/24']


def test_roce_down_is_flagged(fixture_path):
    result = facts(fixture_path, 'roce-down/spark2', '192.168.100.20')
    assert any('no RoCE port is ACTIVE' in p for p in result['problems'])
    assert any('unknown speed' in p for p in result['problems'])


def test_twins_on_their_own_subnets_are_both_hcas(fixture_path, tmp_path):
    # Cluster_link's pair mode gives each twin its own subnet; NCCL_IB_HCA lists every
    # ACTIVE twin with a RoCE v2 IPv4 GID, not only the one in the cluster subnet (98 -> 161 Gb/s
    # in a field report going from one HCA to both).
    import json
    root = tmp_path / 'spark1'
    shutil.copytree(fixture_path('sysfs', 'direct-pair', 'spark1'), str(root))
    twin = '0000:0000:0000:0000:0000:ffff:c0a8:650b'  # 192.168.101.11
    for index in ('2', '3'):
        (root / 'class/infiniband/roceP2p1s0f1/ports/1/gids' / index).write_text(twin + '\n')
    links = json.loads((root / 'ip-addr.json').read_text())
    for link in links:
        for info in link.get('addr_info', []):
            if link['ifname'] == 'enP2p1s0f1np1' and info.get('family') == 'inet':
                info['local'] = '192.168.101.11'
    (root / 'ip-addr.json').write_text(json.dumps(links))
    addresses = parse_ip_addr((root / 'ip-addr.json').read_text())
    ports = read_rdma(str(root))
    result = plan(ports, addresses, read_netdevs(str(root), sorted(addresses)), '192.168.100.10', 'roce')
    assert result['problems'] == []
    assert result['env']['NCCL_IB_HCA'] == 'roceP2p1s0f1,rocep1s0f1' and result['gid_index'] == 3
    # A twin without an IPv4 GID (no address: what a single-port link leaves) is not listed.
    for index in ('2', '3'):
        (root / 'class/infiniband/roceP2p1s0f1/ports/1/gids' / index).write_text('0000:0000:0000:0000:0000:0000:0000:0000\n')
    single = plan(read_rdma(str(root)), addresses, read_netdevs(str(root), sorted(addresses)), '192.168.100.10', 'roce')
    assert single['env']['NCCL_IB_HCA'] == 'rocep1s0f1' and single['problems'] == []
    # The twin keeps its address but its port went DOWN (that half of the cable): NCCL would run on
    # the other twin only, at half the link, so it is refused naming the twin and the fix.
    (root / 'class/infiniband/roceP2p1s0f1/ports/1/state').write_text('1: DOWN\n')
    down = plan(read_rdma(str(root)), addresses, read_netdevs(str(root), sorted(addresses)), '192.168.100.10', 'roce')
    assert down['env']['NCCL_IB_HCA'] == 'rocep1s0f1'
    assert len(down['problems']) == 1, down['problems']
    assert down['problems'][0].startswith('enP2p1s0f1np1 (RoCE port roceP2p1s0f1/1) holds 192.168.101.11/24 but its '
                                          'port is 1: DOWN, not ACTIVE'), down['problems']
    assert 'half the link (rule N5)' in down['problems'][0] and 'cluster_link_mode single' in down['problems'][0]


def test_cluster_ip_on_the_management_nic_is_the_wrong_wire(fixture_path):
    result = facts(fixture_path, 'direct-pair/spark1', '10.10.0.1')
    text = ' '.join(result['problems'])
    assert 'enP7s7' in text and '10000 Mb/s' in text and 'management NIC' in text
    assert 'no ACTIVE RoCE port has a RoCE v2 IPv4 GID in 10.10.0.0/24' in text


@pytest.mark.rule("N4")
def test_socket_mode_is_explicit_tcp_on_the_fast_link(fixture_path):
    result = facts(fixture_path, 'direct-pair/spark1', '192.168.100.10', 'socket')
    assert result['problems'] == []
    env = result['env']
    assert env['NCCL_IB_DISABLE'] == '1' and env['NCCL_P2P_DISABLE'] == '1'
    assert env['NCCL_NET'] == 'Socket'
    assert env['GLOO_SOCKET_IFNAME'] == 'enp1s0f1np1'
    assert 'NCCL_IB_HCA' not in env


def test_socket_mode_on_the_management_nic_still_warns(fixture_path):
    result = facts(fixture_path, 'direct-pair/spark1', '10.10.0.1', 'socket')
    assert any('management NIC' in p for p in result['problems'])


def test_ring_sanity_checks(fixture_path):
    root = fixture_path('sysfs', 'ring3', 'spark1')
    ports = read_rdma(root)
    with open(fixture_path('sysfs', 'ring3', 'spark1', 'ip-addr.json')) as handle:
        addresses = parse_ip_addr(handle.read())
    netdevs = read_netdevs(root, sorted(addresses))
    # move the second half onto the first half's subnet, drop the IPv4 GIDs of another port
    for port in ports:
        if port['device'] == 'roceP2p1s0f0':
            for gid in port['gids']:
                if gid['ipv4']:
                    gid['ipv4'] = '192.168.101.9'
        if port['device'] == 'roceP2p1s0f1':
            port['gids'] = [g for g in port['gids'] if not g['ipv4']]
    addresses['enP2p1s0f0np0'] = [ipaddress.IPv4Interface('192.168.101.9/24')]
    result = plan(ports, addresses, netdevs, '10.10.0.1', 'roce_ring')
    text = ' | '.join(result['problems'])
    assert 'roceP2p1s0f1/1 are Up but have no IPv4 address' in text
    assert 'share the subnet 192.168.101.0/24' in text
    three = plan(ports[:3], addresses, netdevs, '10.10.0.1', 'roce_ring')
    assert any('3 CX7 ports are Up' in p for p in three['problems'])


def test_unknown_cluster_ip_names_the_variable(fixture_path):
    with pytest.raises(RoceError, match='gb10_cluster_ip'):
        facts(fixture_path, 'direct-pair/spark1', '192.168.7.7')
    with pytest.raises(RoceError, match='not an IPv4 address'):
        facts(fixture_path, 'direct-pair/spark1', 'spark1')


def test_loopback_and_iface_mismatch_are_problems(fixture_path):
    result = facts(fixture_path, 'direct-pair/spark1', '127.0.0.1', 'socket',
                   cluster_iface='enp1s0f1np1')
    text = ' '.join(result['problems'])
    assert 'loopback' in text and 'gb10_cluster_iface is enp1s0f1np1' in text


@pytest.mark.parametrize('text', ['not json', '{"ifname": "lo"}', '[{"mtu": 1500}]'])
def test_bad_ip_addr_json(text):
    with pytest.raises(RoceError):
        parse_ip_addr(text)


def test_covering_network():
    nets = [ipaddress.IPv4Network(n) for n in ('192.168.101.0/24', '192.168.106.0/24')]
    assert str(covering_network(nets)) == '192.168.96.0/20'


def test_pair_nodes_agree(fixture_path):
    both = {'spark1': facts(fixture_path, 'direct-pair/spark1', '192.168.100.10'),
            'spark2': facts(fixture_path, 'direct-pair/spark2', '192.168.100.20')}
    assert compare_nodes(both) == []


def test_nodes_that_disagree_are_named(fixture_path):
    mixed = {'spark1': facts(fixture_path, 'direct-pair/spark1', '192.168.100.10'),
             'spark2': facts(fixture_path, 'bonded-pair/spark2', '10.0.0.2')}
    text = ' | '.join(compare_nodes(mixed))
    assert 'GID index: spark1=3, spark2=5' in text
    assert 'one cluster subnet: spark1=192.168.100.0/24, spark2=10.0.0.0/24' in text


def test_ring_of_three_agrees_and_a_missing_node_is_caught(fixture_path):
    ring = dict(('spark%d' % n, facts(fixture_path, 'ring3/spark%d' % n, '10.10.0.%d' % n,
                                      'roce_ring')) for n in (1, 2, 3))
    assert compare_nodes(ring) == []
    del ring['spark3']
    text = ' | '.join(compare_nodes(ring))
    assert 'ring subnet 192.168.103.0/24 is on spark1' in text


@pytest.mark.rule("N1")
def test_twins_whose_ipv4_gids_sit_at_other_indexes_are_refused(fixture_path, tmp_path):
    # NCCL_IB_GID_INDEX is one number for every HCA: a twin whose RoCE v2 IPv4 GID sits at index 5
    # (an IPv6 address took 2 and 3 on that port only) while the other's is at 3 would have NCCL use
    # a wrong GID on one of them.
    import shutil
    root = tmp_path / 'spark1'
    shutil.copytree(fixture_path('sysfs', 'direct-pair', 'spark1'), str(root))
    gids = root / 'class/infiniband/roceP2p1s0f1/ports/1/gids'
    types = root / 'class/infiniband/roceP2p1s0f1/ports/1/gid_attrs/types'
    ndevs = root / 'class/infiniband/roceP2p1s0f1/ports/1/gid_attrs/ndevs'
    for src, dest in (('2', '4'), ('3', '5')):
        for folder in (gids, types, ndevs):
            if (folder / src).exists():
                (folder / dest).write_text((folder / src).read_text())
        (gids / src).write_text('fe80:0000:0000:0000:0000:0000:0000:0001\n')
    addresses = parse_ip_addr((root / 'ip-addr.json').read_text())
    result = plan(read_rdma(str(root)), addresses, read_netdevs(str(root), sorted(addresses)), '192.168.100.10', 'roce')
    assert ('the RoCE v2 IPv4 GID index differs between HCAs (roceP2p1s0f1=5, rocep1s0f1=3); NCCL_IB_GID_INDEX '
            'is one number (rule N1)') in result['problems'], result['problems']


def test_a_ring_link_under_the_speed_floor_is_named_with_its_rate(fixture_path):
    # N5: the ring's links are its four CX7 halves; one that trained at a lower rate is named.
    fast = facts(fixture_path, 'ring3/spark1', '10.10.0.1', 'roce_ring')
    rates = sorted(set(link['speed_mbps'] for link in fast['ring_links']))
    assert fast['problems'] == [] and len(rates) == 1
    slow = facts(fixture_path, 'ring3/spark1', '10.10.0.1', 'roce_ring', min_speed_mbps=rates[0] + 1)
    named = [p for p in slow['problems'] if p.startswith('ring link ')]
    assert sorted(named) == sorted('ring link %s runs at %d Mb/s (rule N5)' % (link['iface'], rates[0])
                                   for link in fast['ring_links'])


def test_each_ring_link_is_the_subnet_of_its_own_gids_address(fixture_path):
    # N6: a ring link's subnet is the one of the address its RoCE v2 GID carries, whatever other
    # addresses its port holds before or after it; a port holding a second address (a second GID,
    # later in the table) keeps its first; a GID whose address the port no longer lists (removed
    # since the table was read) is that address alone.
    root = fixture_path('sysfs', 'ring3', 'spark1')
    with open(fixture_path('sysfs', 'ring3', 'spark1', 'ip-addr.json')) as handle:
        addresses = parse_ip_addr(handle.read())
    ports = read_rdma(root)
    netdevs = read_netdevs(root, sorted(addresses))
    addresses['enP2p1s0f0np0'] = [ipaddress.IPv4Interface(a) for a in ('200.1.1.1/24', '10.0.0.1/8', '192.168.102.1/24')]
    second = [p for p in ports if p['device'] == 'roceP2p1s0f1'][0]
    second['gids'] += [dict(gid, index=gid['index'] + 2, ipv4='172.16.9.1') for gid in second['gids'] if gid['ipv4']]
    addresses['enP2p1s0f1np1'].append(ipaddress.IPv4Interface('172.16.9.1/16'))
    del addresses['enp1s0f0np0']
    links = dict((link['hca'], (link['ip'], link['network'])) for link in
                 plan(ports, addresses, netdevs, '10.10.0.1', 'roce_ring')['ring_links'])
    assert links == {'roceP2p1s0f0': ('192.168.102.1', '192.168.102.0/24'),
                     'roceP2p1s0f1': ('192.168.104.1', '192.168.104.0/24'),
                     'rocep1s0f0': ('192.168.101.1', '192.168.101.1/32'),
                     'rocep1s0f1': ('192.168.103.1', '192.168.103.0/24')}


def test_nodes_with_different_numbers_of_hcas_are_named_with_each_count(fixture_path):
    ring = dict(('spark%d' % n, facts(fixture_path, 'ring3/spark%d' % n, '10.10.0.%d' % n, 'roce_ring'))
                for n in (1, 2, 3))
    ring['spark2'] = dict(ring['spark2'], hcas=ring['spark2']['hcas'][:2])
    assert 'nodes use different numbers of RoCE HCAs: spark1=4, spark2=2, spark3=4' in compare_nodes(ring)


def test_a_transport_the_collection_does_not_know_is_refused_by_name(fixture_path):
    with pytest.raises(RoceError, match=r"^transport must be one of roce, roce_ring, socket, got 'infiniband'$"):
        facts(fixture_path, 'direct-pair/spark1', '192.168.100.10', 'infiniband')
    with pytest.raises(RoceError, match=r"^transport must be one of roce, roce_ring, socket, got 'ib'$"):
        nccl_env('ib', 'enp1s0f1np1', '192.168.100.10')


def test_a_container_without_file_descriptors_is_refused():
    with pytest.raises(RoceError, match=r'^nofile must be above 0, got 0$'):
        rdma_limits({'nofile': 0})
    assert rdma_limits({'nofile': 1})['nofile'] == 1


def direct_pair(fixture_path):
    """(ports, addresses, netdevs) of spark1 of a direct pair, as the module reads them."""
    root = fixture_path('sysfs', 'direct-pair', 'spark1')
    with open(fixture_path('sysfs', 'direct-pair', 'spark1', 'ip-addr.json')) as handle:
        addresses = parse_ip_addr(handle.read())
    return read_rdma(root), addresses, read_netdevs(root, sorted(addresses))


@pytest.mark.parametrize('transport', ['roce', 'roce_ring', 'socket'])
def test_the_transport_as_the_module_receives_it_plans_the_same(fixture_path, transport):
    # The module's transport comes decoded from its JSON arguments, a string equal to the name but
    # not the same object: every decision is by value.
    import json
    tree, ip = ('ring3/spark1', '10.10.0.1') if transport == 'roce_ring' else ('direct-pair/spark1', '192.168.100.10')
    received = json.loads(json.dumps(transport))
    assert facts(fixture_path, tree, ip, received) == facts(fixture_path, tree, ip, transport)


def test_a_cluster_address_on_the_loopback_device_is_refused_whatever_the_address(fixture_path):
    # N3: lo with a routable address (a /32 some setups put there) is still no link between nodes.
    ports, addresses, netdevs = direct_pair(fixture_path)
    addresses['lo'].append(ipaddress.IPv4Interface('10.99.0.1/32'))
    assert any('the cluster address 10.99.0.1 is on loopback' in p
               for p in plan(ports, addresses, netdevs, '10.99.0.1', 'socket')['problems'])
    # A device whose name sorts after lo is no loopback.
    addresses['wlP9s9'].append(ipaddress.IPv4Interface('10.77.0.1/24'))
    assert not [p for p in plan(ports, addresses, netdevs, '10.77.0.1', 'socket')['problems'] if 'loopback' in p]


def test_a_node_without_any_address_says_so_in_the_refusal(fixture_path):
    ports, addresses, netdevs = direct_pair(fixture_path)
    with pytest.raises(RoceError, match=r'\(addresses seen: none\)$'):
        plan(ports, dict((name, []) for name in addresses), netdevs, '192.168.100.10')


def test_another_interface_named_than_the_one_holding_the_address_is_named_in_any_order(fixture_path):
    ports, addresses, netdevs = direct_pair(fixture_path)
    for named in ('enP2p1s0f1np1', 'wlP9s9'):  # sorting before and after the holder
        problems = plan(ports, addresses, netdevs, '192.168.100.10', 'roce', cluster_iface=named)['problems']
        assert 'gb10_cluster_iface is %s but 192.168.100.10 is on enp1s0f1np1' % named in problems
    import json
    same = json.loads('"enp1s0f1np1"')  # as the module receives it
    assert not [p for p in plan(ports, addresses, netdevs, '192.168.100.10', 'roce', cluster_iface=same)['problems']
                if 'gb10_cluster_iface' in p]


def test_a_link_at_exactly_its_floor_passes(fixture_path):
    # N5: the floor is the lowest rate that passes.
    assert facts(fixture_path, 'direct-pair/spark1', '192.168.100.10', min_speed_mbps=200000)['problems'] == []
    rate = facts(fixture_path, 'ring3/spark1', '10.10.0.1', 'roce_ring')['ring_links'][0]['speed_mbps']
    assert facts(fixture_path, 'ring3/spark1', '10.10.0.1', 'roce_ring', min_speed_mbps=rate)['problems'] == []


@pytest.mark.rule("N4")
def test_sockets_on_purpose_do_not_judge_the_roce_ports(fixture_path):
    # A twin down while it holds its address is half the link to RoCE (N5); to TCP on purpose it is nothing.
    ports, addresses, netdevs = direct_pair(fixture_path)
    down = [p for p in ports if p['device'] == 'roceP2p1s0f1'][0]
    down.update(active=False, state='1: DOWN')
    import json
    socket = json.loads('"socket"')  # as the module receives it: equal to the name, not the same object
    assert plan(ports, addresses, netdevs, '192.168.100.10', socket)['problems'] == []
    assert not [p for p in facts(fixture_path, 'roce-down/spark2', '192.168.100.20', socket)['problems'] if 'RoCE' in p]
    roce = plan(ports, addresses, netdevs, '192.168.100.10', 'roce')['problems']
    assert [p for p in roce if p.startswith('enP2p1s0f1np1 (RoCE port roceP2p1s0f1/1) holds 192.168.100.11/')], roce


def test_no_active_roce_port_lists_every_port_and_state_or_says_there_is_no_device(fixture_path):
    down = facts(fixture_path, 'roce-down/spark2', '192.168.100.20')['problems']
    assert ('no RoCE port is ACTIVE (roceP2p1s0f0/1 1: DOWN, roceP2p1s0f1/1 1: DOWN, rocep1s0f0/1 1: DOWN, '
            'rocep1s0f1/1 1: DOWN): NCCL would fall back') in ' | '.join(down), down
    ports, addresses, netdevs = direct_pair(fixture_path)
    none = plan([], addresses, netdevs, '192.168.100.10', 'roce')['problems']
    assert [p for p in none if p.startswith('no RoCE port is ACTIVE (no RDMA device at all): ')], none


def test_active_ports_without_any_ipv4_gid_get_one_refusal_not_an_index_mismatch(fixture_path):
    ports, addresses, netdevs = direct_pair(fixture_path)
    for port in ports:
        port['gids'] = [gid for gid in port['gids'] if not gid['ipv4']]
    result = plan(ports, addresses, netdevs, '192.168.100.10', 'roce')
    assert result['problems'] == ['no ACTIVE RoCE port has a RoCE v2 IPv4 GID in 192.168.100.0/24: the cluster subnet '
                                  'is not on a RoCE device, so NCCL would not use RDMA for it (rule N5)']
    assert result['hcas'] == [] and result['gid_index'] is None


def test_a_twin_with_a_second_address_keeps_the_gid_of_its_first(fixture_path):
    # The kernel adds a GID per address in the order they come: the link's own (cluster_link's) first.
    ports, addresses, netdevs = direct_pair(fixture_path)
    twin = [p for p in ports if p['device'] == 'rocep1s0f1'][0]
    twin['gids'] += [dict(gid, index=gid['index'] + 4, ipv4='192.168.100.99') for gid in twin['gids'] if gid['ipv4']]
    result = plan(ports, addresses, netdevs, '192.168.100.10', 'roce')
    assert result['gid_index'] == 3 and result['problems'] == [], result


def test_a_ring_node_has_its_four_cable_halves_or_a_pairs_two(fixture_path):
    root = fixture_path('sysfs', 'ring3', 'spark1')
    with open(fixture_path('sysfs', 'ring3', 'spark1', 'ip-addr.json')) as handle:
        addresses = parse_ip_addr(handle.read())
    ports, netdevs = read_rdma(root), read_netdevs(root, sorted(addresses))
    assert not [p for p in plan(ports[:2], addresses, netdevs, '10.10.0.1', 'roce_ring')['problems'] if 'CX7 ports are Up' in p]
    assert ('1 CX7 ports are Up: a ring node has 4 (both halves of both QSFP ports), a pair 2 (rule N6)'
            in plan(ports[:1], addresses, netdevs, '10.10.0.1', 'roce_ring')['problems'])
