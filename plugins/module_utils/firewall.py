# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's packet filter (rule A4): one nftables table of the collection's, family inet (IPv4
and IPv6 alike), default-deny on input.

Open to the LAN: SSH and the API gateway's port only (the metrics port of role node_metrics to
the cluster, the controller and the sources named for it). The cluster is trusted on its cluster
interfaces *and* by its addresses, not by source address alone: a LAN machine that forges a cluster
node's address arrives on the management interface and is refused. Everything else is refused
with a TCP reset or an ICMP "administratively prohibited", so a client that is not meant to
reach a port gets a clear refusal at once rather than a hang.

Every address list is parsed as addresses or networks before it is rendered (a value such as
"10.0.0.1\\n} accept" never reaches the rules) and every interface name is checked against what
Linux allows, so what the role writes is what these lists say.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

TABLE = 'gb10_serving'
# Linux interface names: at most 15 bytes (IFNAMSIZ 16 with its NUL), no '/', no whitespace; the
# characters DGX OS and netplan use. Quoting them in nft keeps names such as "enP2p1s0f1np1" whole.
_IFACE = re.compile(r'^[A-Za-z0-9_.:-]{1,15}$')


class FirewallError(Exception):
    """A setting cannot be rendered; the message names the variable and the fix."""


def networks(values, variable):
    """(ipv4, ipv6): the values as normalized networks of each family, duplicates dropped.

    Raises FirewallError naming every value that is not an address or network.
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise FirewallError('%s must be a list of addresses or networks, not %r' % (variable, values))
    ipv4, ipv6, bad = [], [], []
    for value in values:
        try:
            # Text only: ipaddress reads the number 10 as 0.0.0.10.
            if not isinstance(value, str):
                raise ValueError(value)
            net = ipaddress.ip_network(value, strict=False)
        except ValueError:
            bad.append(repr(value))
            continue
        if net.version == 6 and net.network_address.ipv4_mapped is not None and net.prefixlen >= 96:
            # An IPv4 client seen through an IPv6 socket (::ffff:10.0.0.5) is that IPv4 client.
            net = ipaddress.ip_network('%s/%d' % (net.network_address.ipv4_mapped, net.prefixlen - 96))
        family = ipv4 if net.version == 4 else ipv6
        if str(net) not in family:
            family.append(str(net))
    if bad:
        raise FirewallError(
            '%s: %s is not an address or network (write each as 10.0.0.5, 10.0.0.0/24 or fd00::/64, '
            'one per list item)' % (variable, ', '.join(bad)))
    return ipv4, ipv6


def port(value, variable):
    """The value as a TCP port 1-65535, or FirewallError naming the variable."""
    try:
        number = int(str(value), 10)
    except ValueError:
        number = 0
    if not 1 <= number <= 65535:
        raise FirewallError('%s: %r is not a TCP port (1-65535)' % (variable, value))
    return number


def interfaces(values, variable):
    """The interface names, checked; FirewallError names every bad one."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise FirewallError('%s must be a list of interface names, not %r' % (variable, values))
    bad = [repr(v) for v in values if not _IFACE.match(str(v))]
    if bad:
        raise FirewallError('%s: %s is not a Linux interface name (1-15 letters, digits, "_", ".", ":" or "-")'
                            % (variable, ', '.join(bad)))
    names = []
    for value in values:
        if str(value) not in names:
            names.append(str(value))
    return names


def _set(items):
    return items[0] if len(items) == 1 else '{ %s }' % ', '.join(items)


def _from(ipv4, ipv6, match, prefix=''):
    """Rules that accept `match` (after `prefix`) from the networks of each family; none for a
    family without one."""
    rules = []
    for keyword, nets, everyone in (('ip', ipv4, '0.0.0.0/0'), ('ip6', ipv6, '::/0')):
        if everyone in nets:
            source = 'meta nfproto %s' % ('ipv4' if keyword == 'ip' else 'ipv6')
        elif nets:
            source = '%s saddr %s' % (keyword, _set(nets))
        else:
            continue
        rules.append(' '.join(part for part in (prefix, source, match, 'accept') if part))
    return rules


def ruleset(cluster_ifaces, cluster_sources, ssh_port, api_port, api_sources,
            metrics_port=0, metrics_sources=(), open_tcp=(), managed='', engine_ports=(), engine_uids=()):
    """The whole nftables file for `nft -f`: the table replaced in one transaction.

    cluster_ifaces: the cluster link's interfaces; cluster_sources: the nodes' cluster addresses
    (traffic from them on those interfaces passes whole: Ray, NCCL/Gloo, the model copy).
    ssh_port, api_port: open to everyone (api_port to api_sources). metrics_port: open to
    metrics_sources (the controller among them), 0 for none. open_tcp: [{'port': N, 'sources':
    [...]}] for services of the operator's own. engine_ports: the keyless engine's ports on the
    node's loopback, which only the processes of engine_uids (root, the gateway's user) may
    connect to: an output chain resets every other local process's connection (A1).
    """
    ifaces = interfaces(cluster_ifaces, 'firewall_cluster_ifaces')
    if not ifaces:
        raise FirewallError('firewall_cluster_ifaces is empty: the cluster link would be closed between the '
                            'nodes. Set gb10_cluster_iface (or firewall_cluster_ifaces)')
    cluster4, cluster6 = networks(cluster_sources, 'firewall_cluster_sources')
    if not cluster4 + cluster6:
        raise FirewallError('firewall_cluster_sources is empty: Ray and NCCL would be closed between the nodes. '
                            'Set gb10_cluster_ip for each host of gb10_cluster (or firewall_cluster_sources)')
    on_link = 'iifname %s' % _set(['"%s"' % name for name in ifaces])
    rules = [
        'iif "lo" accept',
        'ct state established,related accept',
        'ct state invalid drop',
        # Ping and path MTU for both families; IPv6 needs ICMPv6 to find its neighbours at all.
        'meta l4proto { icmp, ipv6-icmp } accept',
        # DHCPv6 answers come from a link-local server to the client's port 546.
        'ip6 saddr fe80::/10 udp dport 546 accept',
    ]
    rules += _from(cluster4, cluster6, '', prefix=on_link)
    rules.append('tcp dport %d accept' % port(ssh_port, 'firewall_ssh_port'))
    api4, api6 = networks(api_sources, 'firewall_api_sources')
    rules += _from(api4, api6, 'tcp dport %d' % port(api_port, 'firewall_api_port'))
    if int(metrics_port or 0):
        m4, m6 = networks(list(metrics_sources), 'firewall_metrics_sources')
        rules += _from(m4, m6, 'tcp dport %d' % port(metrics_port, 'firewall_metrics_port'))
    for i, entry in enumerate(open_tcp or []):
        if not isinstance(entry, dict) or 'port' not in entry:
            raise FirewallError('firewall_open_tcp[%d]: %r is not {port: N, sources: [...]}' % (i, entry))
        o4, o6 = networks(entry.get('sources', ['0.0.0.0/0', '::/0']), 'firewall_open_tcp[%d].sources' % i)
        rules += _from(o4, o6, 'tcp dport %d' % port(entry['port'], 'firewall_open_tcp[%d].port' % i))
    rules += [
        'meta l4proto tcp reject with tcp reset',
        'reject with icmpx type admin-prohibited',
    ]
    lines = ['# %s' % line for line in managed.splitlines()] if managed else []
    lines += [
        '# Loaded with `nft -f`: the three statements below are one transaction, so the table is',
        '# replaced whole and the node is never without it. Only this table is touched.',
        'table inet %s {}' % TABLE,
        'delete table inet %s' % TABLE,
        'table inet %s {' % TABLE,
        '\tchain input {',
        '\t\ttype filter hook input priority filter; policy drop;',
    ]
    lines += ['\t\t%s' % rule for rule in rules]
    lines += ['\t}']
    lines += _engine_output(engine_ports, engine_uids)
    lines += ['}']
    return '\n'.join(lines) + '\n'


def _engine_output(engine_ports, engine_uids):
    """The output chain that keeps the keyless engine to the gateway and root (rule A1): the engine
    listens on the head's loopback with no key, so any local process (a desktop browser, a user's
    script) could otherwise call every route, admin ones too. The gateway's nginx workers and root
    (the collection's probes and the watchdog, which run as root in their containers) connect;
    every other local process gets a TCP reset. Nothing when there is no engine port."""
    ports = [port(p, 'firewall_engine_ports') for p in engine_ports or []]
    if not ports:
        return []
    uids = []
    for uid in engine_uids or []:
        try:
            number = int(str(uid), 10)
        except ValueError:
            number = -1
        if not 0 <= number <= 4294967294:
            raise FirewallError('firewall_engine_users: %r is not a user ID (0-4294967294)' % (uid,))
        if number not in uids:
            uids.append(number)
    if 0 not in uids:
        uids.insert(0, 0)
    return [
        '\tchain output {',
        '\t\ttype filter hook output priority filter; policy accept;',
        '\t\toifname "lo" tcp dport %s meta skuid != %s reject with tcp reset'
        % (_set([str(p) for p in sorted(set(ports))]), _set([str(u) for u in uids])),
        '\t}',
    ]
