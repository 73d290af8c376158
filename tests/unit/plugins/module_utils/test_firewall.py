"""The node's packet filter (rule A4): default-deny on both families, the cluster trusted on its
interfaces and by its addresses together, and no value reaching the rules unchecked. The role's own
defaults are rendered: a Ray port opened by a default, or a source list that injects a rule, turns
these red."""
import os
import re

import pytest
import yaml

from ansible_collections.gb10.serving.plugins.module_utils.firewall import FirewallError, networks, ruleset

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("A4")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
# Ray's own fixed ports that serving_containers does not set: dashboard, client server, dashboard agent.
RAY_DEFAULT_PORTS = (8265, 10001, 52365)
CLUSTER = ['172.30.211.11', '172.30.211.12']


def defaults(role):
    with open(os.path.join(TOP, 'roles', role, 'defaults', 'main.yml')) as f:
        return yaml.safe_load(f)


def default_table(**overrides):
    fw = defaults('firewall')
    args = dict(cluster_ifaces=['enp1s0f1np1'], cluster_sources=CLUSTER, ssh_port=fw['firewall_ssh_port'],
                api_port=fw['firewall_api_port'], api_sources=fw['firewall_api_sources'], metrics_port=9100,
                metrics_sources=['192.168.1.20'], open_tcp=fw['firewall_open_tcp'])
    args.update(overrides)
    return ruleset(**args)


def rules(text):
    return [line.strip() for line in text.splitlines() if line.startswith('\t\t')]


def open_to_the_lan(text):
    """{port: [rules]} for every TCP port a rule accepts that a machine off the cluster link can match."""
    found = {}
    for rule in rules(text):
        if rule.endswith(' accept') and not rule.startswith('iifname'):
            for port in re.findall(r'tcp dport (\d+)', rule):
                found.setdefault(int(port), []).append(rule)
    return found


def test_the_default_table_opens_ssh_the_gateway_and_the_metrics_port_only_and_drops_the_rest():
    table = default_table()
    assert sorted(open_to_the_lan(table)) == [22, 8443, 9100]
    assert 'type filter hook input priority filter; policy drop;' in table
    assert rules(table)[-2:] == ['meta l4proto tcp reject with tcp reset', 'reject with icmpx type admin-prohibited']
    # Both families reach the gateway; the metrics port only its sources.
    assert open_to_the_lan(table)[8443] == ['meta nfproto ipv4 tcp dport 8443 accept',
                                            'meta nfproto ipv6 tcp dport 8443 accept']
    assert open_to_the_lan(table)[9100] == ['ip saddr 192.168.1.20/32 tcp dport 9100 accept']


def test_no_port_ray_listens_on_faces_the_lan():
    ray = defaults('serving_containers')
    ports = [ray['serving_containers_port'], ray['serving_containers_object_manager_port'], ray['serving_containers_node_manager_port']]
    ports += list(RAY_DEFAULT_PORTS)
    assert not set(int(p) for p in ports) & set(open_to_the_lan(default_table()))


def test_the_cluster_is_trusted_on_its_interfaces_and_by_its_addresses_together():
    table = default_table(cluster_ifaces=['enp1s0f1np1', 'enP2p1s0f1np1'])
    trusted = [r for r in rules(table) if '172.30.211.11' in r]
    assert trusted == ['iifname { "enp1s0f1np1", "enP2p1s0f1np1" } ip saddr { 172.30.211.11/32, 172.30.211.12/32 } accept']


@pytest.mark.parametrize('variable,override', [
    ('firewall_cluster_sources', {'cluster_sources': ['10.0.0.1\n} accept']}),
    ('firewall_api_sources', {'api_sources': ['0.0.0.0/0 tcp dport 6379']}),
    ('firewall_metrics_sources', {'metrics_sources': ['host.example']}),
    ('firewall_api_sources', {'api_sources': [10]}),
    ('firewall_cluster_ifaces', {'cluster_ifaces': ['eth0" accept; #']}),
    ('firewall_open_tcp[0].port', {'open_tcp': [{'port': '22; accept'}]}),
    ('firewall_api_port', {'api_port': 70000}),
])
def test_a_value_that_is_not_an_address_port_or_interface_is_refused_naming_its_variable(variable, override):
    with pytest.raises(FirewallError) as exc:
        default_table(**override)
    assert str(exc.value).startswith(variable), str(exc.value)


def test_an_empty_cluster_is_refused_rather_than_closing_the_link():
    for override in ({'cluster_sources': []}, {'cluster_ifaces': []}):
        with pytest.raises(FirewallError, match='empty'):
            default_table(**override)


def test_families_are_split_and_an_ipv4_client_seen_over_ipv6_is_that_client():
    assert networks(['10.0.0.0/24', 'fd00::1', '::ffff:10.0.0.5', '10.0.0.0/24'], 'x') == (
        ['10.0.0.0/24', '10.0.0.5/32'], ['fd00::1/128'])
    table = default_table(api_sources=['10.1.0.0/16', 'fd00:1::/64'], open_tcp=[{'port': 9400}])
    assert 'ip saddr 10.1.0.0/16 tcp dport 8443 accept' in rules(table)
    assert 'ip6 saddr fd00:1::/64 tcp dport 8443 accept' in rules(table)
    assert sorted(open_to_the_lan(table)) == [22, 8443, 9100, 9400]


@pytest.mark.rule("A1")
def test_only_root_and_the_gateways_user_reach_the_keyless_engine_on_loopback():
    table = default_table(engine_ports=[8000, 8000, 8001], engine_uids=[33, '33'])
    output = table.split('\tchain output {', 1)[1]
    assert 'type filter hook output priority filter; policy accept;' in output
    assert 'oifname "lo" tcp dport { 8000, 8001 } meta skuid != { 0, 33 } reject with tcp reset' in output
    # Root is always among them (the probes and the watchdog); no engine port, no output chain.
    assert 'meta skuid != 0 reject' in default_table(engine_ports=[8000], engine_uids=[])
    assert 'chain output' not in default_table()


@pytest.mark.parametrize('override', [dict(engine_ports=['8000; accept']), dict(engine_ports=[8000], engine_uids=['0 accept'])])
def test_an_engine_port_or_user_that_is_not_a_number_is_refused(override):
    with pytest.raises(FirewallError, match='firewall_engine_'):
        default_table(**override)
