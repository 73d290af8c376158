"""Planner of the cluster link (role cluster_link, rules N3, N5, N6): inventory checked across
hosts, ports chosen or detected from the sysfs fixture trees, conflicts refused, netplan documents
for pair, single, bond and mesh (golden files under tests/fixtures/cluster_link/, which molecule's
verify feeds to `netplan generate`)."""
import copy
import ipaddress
import os

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import cluster_link as cl
from ansible_collections.gb10.serving.plugins.module_utils.roce import read_rdma

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("N3", "N5", "N6")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
GOLDEN = os.path.join(TOP, 'tests', 'fixtures', 'cluster_link')
CX7 = {'enp1s0f0np0', 'enP2p1s0f0np0', 'enp1s0f1np1', 'enP2p1s0f1np1', 'enP7s7', 'lo', 'wlP9s9'}
BOND_PARAMS = {'mode': '802.3ad', 'lacp-rate': 'fast', 'mii-monitor-interval': 100,
               'transmit-hash-policy': 'layer3+4'}


def pair(mode='single', ports=None, a='10.0.0.1', b='10.0.0.2', prefix=24, primary='enp1s0f1np1'):
    ports = ports if ports is not None else (['enp1s0f1np1'] if mode == 'single' else 'detect')
    return [
        {'host': 'spark1', 'mode': mode, 'ports': ports, 'address': a, 'prefix': prefix,
         'management': ['192.168.1.11'], 'mtu': 9000, 'primary': primary},
        {'host': 'spark2', 'mode': mode, 'ports': ports, 'address': b, 'prefix': prefix,
         'management': ['192.168.1.12'], 'mtu': 9000, 'primary': primary},
    ]


# The ring3 fixture's cabling: spark1 f0 <-> spark2 f1, spark1 f1 <-> spark3 f0, spark2 f0 <-> spark3 f1,
# each cable half on its own /24 (tests/fixtures/sysfs/README.md).
MESH = {
    'spark1': {'spark2': [{'port': 'enp1s0f0np0', 'address': '192.168.101.1/24'},
                          {'port': 'enP2p1s0f0np0', 'address': '192.168.102.1/24'}],
               'spark3': [{'port': 'enp1s0f1np1', 'address': '192.168.103.1/24'},
                          {'port': 'enP2p1s0f1np1', 'address': '192.168.104.1/24'}]},
    'spark2': {'spark3': [{'port': 'enp1s0f0np0', 'address': '192.168.105.2/24'},
                          {'port': 'enP2p1s0f0np0', 'address': '192.168.106.2/24'}],
               'spark1': [{'port': 'enp1s0f1np1', 'address': '192.168.101.2/24'},
                          {'port': 'enP2p1s0f1np1', 'address': '192.168.102.2/24'}]},
    'spark3': {'spark1': [{'port': 'enp1s0f0np0', 'address': '192.168.103.3/24'},
                          {'port': 'enP2p1s0f0np0', 'address': '192.168.104.3/24'}],
               'spark2': [{'port': 'enp1s0f1np1', 'address': '192.168.105.3/24'},
                          {'port': 'enP2p1s0f1np1', 'address': '192.168.106.3/24'}]},
}


def mesh(data=None):
    data = data or MESH
    return [{'host': h, 'mode': 'mesh', 'mesh': data[h], 'management': ['10.10.0.%d' % (i + 1)],
             'mtu': 9000} for i, h in enumerate(sorted(data))]


def sysfs(tree):
    return read_rdma(os.path.join(TOP, 'tests', 'fixtures', 'sysfs', *tree.split('/')))


def golden(name):
    with open(os.path.join(GOLDEN, name)) as handle:
        return handle.read()


def test_detect_reads_the_up_ports_as_ibdev2netdev_shows_them():
    assert cl.detect_ports(sysfs('direct-pair/spark1')) == ['enP2p1s0f1np1', 'enp1s0f1np1']
    assert cl.detect_ports(sysfs('bonded-pair/spark1')) == ['enP2p1s0f0np0', 'enp1s0f0np0']
    assert len(cl.detect_ports(sysfs('ring3/spark1'))) == 4
    assert cl.detect_ports(sysfs('roce-down/spark2')) == []


def test_single_port_plan_and_document():
    result = cl.plan('spark1', pair(), [], CX7, {}, {})
    assert result['problems'] == []
    assert result['ports'] == ['enp1s0f1np1']
    assert result['interfaces'] == [{'iface': 'enp1s0f1np1', 'address': '10.0.0.1/24', 'peer': None}]
    assert result['checks'] == [{'iface': 'enp1s0f1np1', 'address': '10.0.0.1/24', 'peer': 'spark2',
                                 'peer_ip': '10.0.0.2'}]
    assert result['content'] == golden('single-spark1.yaml')
    eth = result['document']['network']['ethernets']['enp1s0f1np1']
    assert eth == {'dhcp4': False, 'dhcp6': False, 'mtu': 9000, 'optional': True,
                   'addresses': ['10.0.0.1/24']}


def test_pair_addresses_both_twins_each_on_its_own_subnet():
    # The two halves of one cable are two PCIe x4 links of ~100 Gb/s each; the default
    # for two Sparks gives each its own subnet, so NCCL can use both HCAs (roce_facts).
    detected = cl.detect_ports(sysfs('direct-pair/spark1'))
    result = cl.plan('spark1', pair('pair'), detected, CX7, {}, {})
    assert result['problems'] == []
    assert result['ports'] == ['enp1s0f1np1', 'enP2p1s0f1np1']  # gb10_cluster_iface first
    assert result['interfaces'] == [
        {'iface': 'enp1s0f1np1', 'address': '10.0.0.1/24', 'peer': None},
        {'iface': 'enP2p1s0f1np1', 'address': '10.0.1.1/24', 'peer': None}]
    # Each twin pings the peer's twin in its own subnet.
    assert result['checks'] == [
        {'iface': 'enp1s0f1np1', 'address': '10.0.0.1/24', 'peer': 'spark2', 'peer_ip': '10.0.0.2'},
        {'iface': 'enP2p1s0f1np1', 'address': '10.0.1.1/24', 'peer': 'spark2', 'peer_ip': '10.0.1.2'}]
    assert result['content'] == golden('pair-spark1.yaml')
    assert cl.plan('spark2', pair('pair'), detected, CX7, {}, {})['problems'] == []


def test_pair_twin_address_given_or_derived():
    assert str(cl.twin_address(ipaddress.IPv4Interface('172.30.211.11/24'))) == '172.30.212.11/24'
    assert str(cl.twin_address(ipaddress.IPv4Interface('10.0.0.2/30'))) == '10.0.0.6/30'
    cluster = pair('pair', ['enp1s0f1np1', 'enP2p1s0f1np1'])
    cluster[0]['twin_address'], cluster[1]['twin_address'] = '192.168.200.10', '192.168.200.11'
    result = cl.plan('spark2', cluster, [], CX7, {}, {})
    assert result['problems'] == [] and result['interfaces'][1]['address'] == '192.168.200.11/24'
    cluster[1]['twin_address'] = '192.168.201.11'
    problems = cl.plan('spark1', cluster, [], CX7, {}, {})['problems']
    assert any("second twins' addresses are in different subnets" in p and 'gb10_cluster_twin_ip' in p
               for p in problems), problems
    cluster[0]['twin_address'] = cluster[1]['twin_address'] = '10.0.0.9'
    problems = cl.plan('spark1', cluster, [], CX7, {}, {})['problems']
    assert any('host spark1: the twin address 10.0.0.9/24 is in the cluster subnet 10.0.0.0/24' in p
               for p in problems), problems
    assert any('cluster address 10.0.0.9 is used by more than one host' in p for p in problems), problems


def test_pair_refuses_a_cluster_iface_that_is_not_one_of_its_ports_with_the_right_port():
    # `-e gb10_cluster_iface=lo` (or the management NIC) was answered with "remove the
    # address from enp1s0f1np1", the right port. The pair names the port to set instead.
    detected = cl.detect_ports(sysfs('direct-pair/spark1'))
    for wrong in ('lo', 'enP7s7'):
        result = cl.plan('spark1', pair('pair', primary=wrong), detected, CX7, {}, {})
        assert result['content'] is None
        assert any(('host spark1: gb10_cluster_iface is %s, which is not one of the two ConnectX-7 ports' % wrong) in p
                   and 'Fix: set gb10_cluster_iface to enp1s0f1np1' in p for p in result['problems']), result['problems']
    one = cl.plan('spark1', pair('pair', ports=['enp1s0f1np1']), [], CX7, {}, {})['problems']
    assert any('mode pair uses the two ports of one ConnectX-7 cable (2) but 1 port(s)' in p for p in one), one


def test_bond_of_the_detected_halves_as_the_field_runs_it():
    detected = cl.detect_ports(sysfs('bonded-pair/spark1'))
    result = cl.plan('spark1', pair('bond'), detected, CX7, {}, {}, bond_parameters=BOND_PARAMS)
    assert result['problems'] == []
    assert result['ports'] == ['enP2p1s0f0np0', 'enp1s0f0np0']
    assert result['checks'][0]['iface'] == 'bond0'
    assert result['content'] == golden('bond-spark1.yaml')
    bond = result['document']['network']['bonds']['bond0']
    assert bond['interfaces'] == ['enP2p1s0f0np0', 'enp1s0f0np0'] and bond['mtu'] == 9000
    assert bond['parameters']['mode'] == '802.3ad'
    for port in result['ports']:
        assert 'addresses' not in result['document']['network']['ethernets'][port]


def test_mesh_gives_each_cable_half_its_own_subnet_and_pings_the_other_end():
    result = cl.plan('spark1', mesh(), [], CX7, {}, {})
    assert result['problems'] == []
    assert sorted(result['ports']) == sorted(['enp1s0f0np0', 'enP2p1s0f0np0', 'enp1s0f1np1', 'enP2p1s0f1np1'])
    assert {(c['iface'], c['peer'], c['peer_ip']) for c in result['checks']} == {
        ('enp1s0f0np0', 'spark2', '192.168.101.2'), ('enP2p1s0f0np0', 'spark2', '192.168.102.2'),
        ('enp1s0f1np1', 'spark3', '192.168.103.3'), ('enP2p1s0f1np1', 'spark3', '192.168.104.3')}
    assert result['content'] == golden('mesh-spark1.yaml')
    for host in ('spark2', 'spark3'):
        assert cl.plan(host, mesh(), [], CX7, {}, {})['problems'] == []


def test_mesh_addresses_match_the_ring3_fixture_that_roce_facts_accepts():
    """The planner's mesh is the layout roce_facts' ring checks were written against (N6)."""
    import json
    for host in ('spark1', 'spark2', 'spark3'):
        with open(os.path.join(TOP, 'tests', 'fixtures', 'sysfs', 'ring3', host, 'ip-addr.json')) as handle:
            live = json.load(handle)
        result = cl.plan(host, mesh(), [], CX7, {}, {})
        assert cl.live_drift(result['interfaces'], result['ports'], live, 9000) == []


def test_rendering_is_stable_and_plain_yaml():
    import yaml
    one = cl.plan('spark1', pair('bond'), ['enp1s0f0np0', 'enP2p1s0f0np0'], CX7, {}, {},
                  bond_parameters=BOND_PARAMS)
    two = cl.plan('spark1', pair('bond'), ['enP2p1s0f0np0', 'enp1s0f0np0'], CX7, {}, {},
                  bond_parameters=BOND_PARAMS)
    assert one['content'] == two['content']
    assert yaml.safe_load(one['content']) == one['document']
    renderer = cl.plan('spark1', pair(), [], CX7, {}, {}, renderer='NetworkManager', optional=False)
    assert yaml.safe_load(renderer['content'])['network']['renderer'] == 'NetworkManager'
    assert 'optional' not in renderer['content']


def test_duplicate_address_is_refused_naming_both_hosts():
    problems = cl.plan('spark1', pair(b='10.0.0.1'), [], CX7, {}, {})['problems']
    assert any('hosts spark1 and spark2: cluster address 10.0.0.1 is used by more than one host' in p
               and 'gb10_cluster_ip' in p and 'Fix:' in p for p in problems), problems


@pytest.mark.rule("N3")
def test_management_address_as_cluster_address_or_in_its_subnet_is_refused():
    cluster = pair(a='192.168.1.12', b='192.168.1.13')
    problems = cl.plan('spark1', cluster, [], CX7, {}, {})['problems']
    assert any('host spark1: its cluster address 192.168.1.12' in p and 'management address of host spark2' in p
               for p in problems), problems
    assert any('cluster subnet 192.168.1.0/24' in p and 'holds the management address 192.168.1.11' in p
               for p in problems), problems


def test_management_address_on_a_chosen_port_is_refused():
    addresses = {'enP7s7': [ipaddress.IPv4Interface('192.168.1.11/24')]}
    problems = cl.plan('spark1', pair(ports=['enP7s7']), [], CX7, addresses, {})['problems']
    assert any('host spark1: port enP7s7 carries the management address 192.168.1.11' in p
               and 'cluster_link_ports' in p for p in problems), problems


@pytest.mark.rule("N3")
def test_cluster_address_already_on_another_interface_is_refused():
    addresses = {'wlP9s9': [ipaddress.IPv4Interface('10.0.0.1/24')]}
    problems = cl.plan('spark1', pair(), [], CX7, addresses, {})['problems']
    assert any('cluster address 10.0.0.1 is already on wlP9s9' in p for p in problems), problems


@pytest.mark.parametrize('mode,ports,detected,fragment', [
    ('single', 'detect', ['enP2p1s0f1np1', 'enp1s0f1np1'],
     'host spark1: mode single uses exactly one port but 2 port(s) are detected'),
    ('bond', ['enp1s0f1np1'], [], 'host spark1: mode bond uses the two ports of one ConnectX-7 cable (2) but 1 port(s)'),
    ('bond', 'detect', [], 'but 0 port(s) are detected (ACTIVE ConnectX-7 ports: none)'),
    ('single', ['eth7'], [], 'cluster_link_ports names eth7, which this host does not have'),
    ('bond', ['enp1s0f1np1', 'enp1s0f1np1'], [], 'names a port twice'),
])
def test_port_count_the_mode_cannot_use_is_refused(mode, ports, detected, fragment):
    result = cl.plan('spark1', pair(mode, ports), detected, CX7, {}, {})
    assert any(fragment in p for p in result['problems']), result['problems']
    assert result['content'] is None


def test_other_netplan_file_on_the_same_port_is_refused():
    other = {'/etc/netplan/40-cx7.yaml': 'network:\n  version: 2\n  ethernets:\n    enp1s0f1np1:\n'
             '      link-local: [ ipv4 ]\n'}
    problems = cl.plan('spark1', pair(), [], CX7, {}, other)['problems']
    assert any('/etc/netplan/40-cx7.yaml also configures enp1s0f1np1' in p for p in problems), problems
    unrelated = {'/etc/netplan/01-network-manager-all.yaml': 'network:\n  version: 2\n  renderer: NetworkManager\n'}
    assert cl.plan('spark1', pair(), [], CX7, {}, unrelated)['problems'] == []


def test_networkmanagers_own_netplan_file_on_the_same_port_is_refused():
    # Ubuntu's NetworkManager keeps a connection as /etc/netplan/90-NM-<uuid>.yaml, the device keyed by
    # the connection and named under match (the shape netplan's own passthrough tests and NM write).
    nm = {'/etc/netplan/90-NM-87749f1d-334f-40b2-98d4-55db58965f5f.yaml':
          'network:\n  version: 2\n  ethernets:\n    NM-87749f1d-334f-40b2-98d4-55db58965f5f:\n'
          '      renderer: NetworkManager\n      match:\n        name: "enp1s0f1np1"\n      dhcp4: true\n'
          '      networkmanager:\n        uuid: "87749f1d-334f-40b2-98d4-55db58965f5f"\n        name: "Wired connection 2"\n'}
    problems = cl.plan('spark1', pair(), [], CX7, {}, nm)['problems']
    assert any('90-NM-87749f1d-334f-40b2-98d4-55db58965f5f.yaml also configures enp1s0f1np1' in p
               for p in problems), problems
    # A bond of another file that takes the port as a member, in either list form.
    for members in ('[enp1s0f1np1, enp1s0f0np0]', '\n        - enp1s0f1np1'):
        bond = {'/etc/netplan/70-bond.yaml': 'network:\n  version: 2\n  bonds:\n    bond9:\n      interfaces: %s\n'
                % members}
        assert any('70-bond.yaml also configures enp1s0f1np1' in p
                   for p in cl.plan('spark1', pair(), [], CX7, {}, bond)['problems']), members
    # Another device whose name only starts like ours, and the same name in a comment's prose, are not ours.
    other = {'/etc/netplan/90-NM-1.yaml': 'network:\n  version: 2\n  ethernets:\n    NM-1:\n      match:\n'
             '        name: "enp1s0f1np1x"\n      # was enp1s0f1np1 once\n'}
    assert cl.plan('spark1', pair(), [], CX7, {}, other)['problems'] == []


def test_hosts_that_disagree_or_sit_in_different_subnets_are_refused():
    cluster = pair(b='10.0.1.2')
    assert any('different subnets' in p for p in cl.plan('spark1', cluster, [], CX7, {}, {})['problems'])
    cluster = pair()
    cluster[1]['mtu'] = 1500
    assert any('cluster_link_mtu differs' in p for p in cl.plan('spark1', cluster, [], CX7, {}, {})['problems'])
    cluster = pair()
    cluster[1]['mode'] = 'bond'
    assert any('cluster_link_mode differs' in p for p in cl.plan('spark1', cluster, [], CX7, {}, {})['problems'])


@pytest.mark.parametrize('entry,fragment', [
    ({'address': ''}, 'host spark1: cluster_link_address (gb10_cluster_ip) is not set'),
    ({'address': '10.0.0.300'}, 'is not an IPv4 address with a prefix'),
    ({'address': '10.0.0.0'}, 'network or broadcast address'),
    ({'prefix': 32}, 'holds no second host'),
    ({'mode': 'ring'}, "cluster_link_mode is 'ring'"),
])
def test_bad_addresses_and_modes_name_the_variable(entry, fragment):
    cluster = pair()
    cluster[0].update(entry)
    problems = cl.plan('spark1', cluster, [], CX7, {}, {})['problems']
    assert any(fragment in p and 'host spark1' in p for p in problems), problems


def test_mtu_out_of_range_is_refused():
    problems = cl.plan('spark1', pair(), [], CX7, {}, {}, mtu=9600)['problems']
    assert any('cluster_link_mtu 9600 is outside 1280..9216' in p for p in problems)


def test_mesh_with_a_shared_subnet_is_refused_n6():
    data = copy.deepcopy(MESH)
    data['spark1']['spark3'][0]['address'] = '192.168.101.5/24'
    problems = cl.plan('spark1', mesh(data), [], CX7, {}, {})['problems']
    assert any('subnet 192.168.101.0/24 is on more than one link' in p and '(N6)' in p for p in problems), problems


def test_mesh_missing_a_peer_or_an_end_is_refused():
    data = copy.deepcopy(MESH)
    del data['spark1']['spark3']
    problems = cl.plan('spark1', mesh(data), [], CX7, {}, {})['problems']
    assert any('host spark1: cluster_link_mesh has no link to spark3' in p for p in problems), problems
    assert any('host spark3: link subnet 192.168.103.0/24 to spark1 has no matching address on spark1' in p
               for p in problems), problems


def test_mesh_on_two_hosts_or_with_three_ports_is_refused():
    two = {h: {p: v for p, v in MESH[h].items() if p != 'spark3'} for h in ('spark1', 'spark2')}
    problems = cl.plan('spark1', mesh(two), [], CX7, {}, {})['problems']
    assert any('mode mesh is for three nodes' in p for p in problems), problems
    data = copy.deepcopy(MESH)
    data['spark1']['spark3'] = data['spark1']['spark3'][:1]
    problems = cl.plan('spark1', mesh(data), [], CX7, {}, {})['problems']
    assert any('mode mesh uses 2 or 4 ports' in p for p in problems), problems
    assert any('port(s) per peer' in p for p in problems), problems


def test_mesh_names_an_unknown_peer_or_no_mesh():
    data = copy.deepcopy(MESH)
    data['spark1']['spark9'] = data['spark1'].pop('spark3')
    problems = cl.plan('spark1', mesh(data), [], CX7, {}, {})['problems']
    assert any('cluster_link_mesh names spark9, which is not a host of this play' in p for p in problems)
    cluster = mesh()
    cluster[0]['mesh'] = {}
    problems = cl.plan('spark1', cluster, [], CX7, {}, {})['problems']
    assert any('host spark1: cluster_link_mesh is empty' in p for p in problems)


def test_live_drift_finds_missing_address_and_mtu():
    result = cl.plan('spark1', pair(), [], CX7, {}, {})
    fresh = [{'ifname': 'enp1s0f1np1', 'mtu': 1500, 'addr_info': []}]
    drift = cl.live_drift(result['interfaces'], result['ports'], fresh, 9000)
    assert 'enp1s0f1np1 has no IPv4 address, not 10.0.0.1/24' in drift
    assert 'enp1s0f1np1 runs at MTU 1500, not 9000' in drift
    done = [{'ifname': 'enp1s0f1np1', 'mtu': 9000,
             'addr_info': [{'family': 'inet', 'local': '10.0.0.1', 'prefixlen': 24}]}]
    assert cl.live_drift(result['interfaces'], result['ports'], done, 9000) == []
    bond = cl.plan('spark1', pair('bond'), ['enp1s0f0np0', 'enP2p1s0f0np0'], CX7, {}, {})
    assert cl.live_drift(bond['interfaces'], bond['ports'], [], 9000) == ['bond0 does not exist yet']


@pytest.mark.rule("N6")
def test_a_mesh_of_slash_30_links_in_one_slash_24_is_refused_as_one_subnet_to_nccl():
    # Each cable half on its own /30, all six in 192.168.100.0/24: distinct subnets to the kernel, one
    # to NCCL, which compares 24 bits (NCCL_IB_SUBNET_PREFIX_LEN's default).
    data = copy.deepcopy(MESH)
    thirds = {'192.168.%d.' % n: '192.168.100.%d' % (4 * (n - 101)) for n in range(101, 107)}
    for host in data:
        for peer in data[host]:
            for link in data[host][peer]:
                ip = link['address'].split('/')[0]
                base, last = ip.rsplit('.', 1)
                start = int(thirds[base + '.'].rsplit('.', 1)[1])
                link['address'] = '192.168.100.%d/30' % (start + 1 + (int(last) > 1))
    problems = cl.plan('spark1', mesh(data), [], CX7, {}, {})['problems']
    assert any(p.startswith('link subnets 192.168.100.0/30, 192.168.100.4/30') and 'NCCL_IB_SUBNET_PREFIX_LEN' in p
               for p in problems), problems
    assert not any('one subnet to NCCL' in p for p in cl.plan('spark1', mesh(), [], CX7, {}, {})['problems'])
