# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Planning of the ConnectX-7 cluster link (role cluster_link): validate every host's inventory
against the others, pick the ports, and compute the netplan document of the link.

Pure: no file is read or written here except through the callers' arguments, so that unit tests
run it on data alone. The module ``gb10.serving.cluster_link_plan`` feeds it sysfs (through
``roce.read_rdma``), ``ip -j addr`` and the other netplan files of the node.

Modes (rules N3, N5, N6):
 pair    both halves ("twins") of one CX7 cable, each on its own subnet: the first carries the
          host's cluster address, the second its twin address; NCCL then uses both HCAs (the
          default for two Sparks: one twin is a PCIe x4 link of about 100 Gb/s, the port's 200
          needs both)
  single  one CX7 port carries the host's cluster address (gb10_cluster_ip/prefix)
  bond    the two ports of one CX7 (the halves of one QSFP cable) as one bond with that address,
          as the field reports run it (bond0, 10.0.0.1 <-> 10.0.0.2)
  mesh    three nodes without a switch, each direct link on its own subnet (N6); the addresses
          come per peer: {peer: [{port, address: ip/prefix}, ...]}
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

MODES = ('pair', 'single', 'bond', 'mesh')
# The bits NCCL compares to tell RoCE subnets apart: NCCL_IB_SUBNET_PREFIX_LEN's default
# (NVIDIA/nccl src/transport/net_ib/connect.cc at v2.30.7-1).
NCCL_SUBNET_PREFIX_LEN = 24
# Ports each mode can use: the two halves of one QSFP cable (pair, bond); one port; in a mesh one
# or two ports per peer, so 2 or 4 on a node of three (N6: a ring node has 4 Up, a pair 2).
PORT_COUNTS = {'pair': (2,), 'single': (1,), 'bond': (2,), 'mesh': (2, 4)}
DEFAULT_MTU = 9000
MIN_MTU = 1280
MAX_MTU = 9216
HEADER = ('# Managed by gb10.serving (role cluster_link): the ConnectX-7 cluster link.\n'
          '# Edits are replaced on the next run; change the inventory instead.\n')


class ClusterLinkError(ValueError):
    """Inventory that cannot be planned into a cluster link."""


def detect_ports(rdma_ports):
    """Net devices of the ACTIVE RDMA ports (what `ibdev2netdev` shows as "(Up)"), sorted.

    rdma_ports: ``roce.read_rdma()``; each entry has ``netdev`` and ``active``.
    """
    names = set()
    for port in rdma_ports:
        if port.get('active') and port.get('netdev'):
            names.add(port['netdev'])
    return sorted(names)


def _ip(text):
    try:
        return ipaddress.IPv4Address(str(text).strip())
    except ValueError:
        return None


def _interface(address, prefix=None):
    """"10.0.0.1" + 24 or "10.0.0.1/24" -> IPv4Interface; ClusterLinkError when it is none."""
    text = str(address or '').strip()
    if prefix not in (None, '') and '/' not in text:
        text = '%s/%s' % (text, prefix)
    try:
        iface = ipaddress.IPv4Interface(text)
    except ValueError:
        raise ClusterLinkError('%r is not an IPv4 address with a prefix' % (text,))
    if '/' not in text:
        raise ClusterLinkError('%r has no prefix length' % (text,))
    if iface.network.prefixlen > 30 and iface.network.prefixlen != 31:
        raise ClusterLinkError('%s: a /%d holds no second host' % (text, iface.network.prefixlen))
    if iface.ip in (iface.network.network_address, iface.network.broadcast_address) \
            and iface.network.prefixlen < 31:
        raise ClusterLinkError('%s is the network or broadcast address of its subnet' % text)
    if iface.ip.is_loopback or iface.ip.is_multicast or iface.ip.is_unspecified:
        raise ClusterLinkError('%s is not a unicast address a link can carry' % text)
    return iface


def _management_ips(entry):
    out = []
    for value in entry.get('management') or []:
        ip = _ip(value)
        if ip is not None and ip not in out:
            out.append(ip)
    return out


def normalize(entry):
    """One host's inventory -> {host, mode, ports, links: [{port, address, peer}], management}.

    ``ports`` stays 'detect' or a list; links of single/bond carry port None (the bond or port is
    chosen later). Raises ClusterLinkError naming the host and the variable.
    """
    host = entry.get('host') or '?'
    mode = entry.get('mode') or 'single'
    if mode not in MODES:
        raise ClusterLinkError('host %s: cluster_link_mode is %r. Fix: set it to one of %s.'
                               % (host, mode, ', '.join(MODES)))
    ports = entry.get('ports')
    if ports in (None, '', 'detect'):
        ports = 'detect'
    elif isinstance(ports, str):
        ports = [p.strip() for p in ports.split(',') if p.strip()]
    else:
        ports = [str(p) for p in ports]
    links = []
    if mode == 'mesh':
        mesh = entry.get('mesh') or {}
        if not isinstance(mesh, dict) or not mesh:
            raise ClusterLinkError(
                'host %s: cluster_link_mesh is empty; mode mesh takes the addresses per peer. Fix: '
                'set cluster_link_mesh: {<peer host>: [{port: enp1s0f0np0, address: 192.168.101.1/24}, '
                '...], ...} with one entry per cable half (N6).' % host)
        for peer in sorted(mesh):
            items = mesh[peer]
            if isinstance(items, dict):
                items = [items]
            if not isinstance(items, list) or not items:
                raise ClusterLinkError('host %s: cluster_link_mesh.%s must be a list of {port, address}.'
                                       % (host, peer))
            for item in items:
                if not isinstance(item, dict) or not item.get('port') or not item.get('address'):
                    raise ClusterLinkError(
                        'host %s: cluster_link_mesh.%s has an entry without port and address (%r). '
                        'Fix: write each as {port: <CX7 netdev>, address: <ip>/<prefix>}.'
                        % (host, peer, item))
                try:
                    address = _interface(item['address'])
                except ClusterLinkError as exc:
                    raise ClusterLinkError('host %s: cluster_link_mesh.%s: %s. Fix: write the '
                                           'address as ip/prefix, e.g. 192.168.101.1/24.'
                                           % (host, peer, exc))
                links.append({'port': str(item['port']), 'address': address, 'peer': str(peer)})
    else:
        address = entry.get('address')
        if not address:
            raise ClusterLinkError(
                'host %s: cluster_link_address (gb10_cluster_ip) is not set. Fix: set gb10_cluster_ip '
                'to this node\'s address on the cluster link (e.g. 10.0.0.1) and gb10_cluster_prefix '
                '(e.g. 24).' % host)
        try:
            iface = _interface(address, entry.get('prefix'))
        except ClusterLinkError as exc:
            raise ClusterLinkError('host %s: cluster_link_address/cluster_link_prefix: %s. Fix: set '
                                   'gb10_cluster_ip to an IPv4 address and gb10_cluster_prefix to its '
                                   'prefix length (e.g. 10.0.0.1 and 24).' % (host, exc))
        links.append({'port': None, 'address': iface, 'peer': None})
        if mode == 'pair':
            links.append({'port': None, 'address': _twin_interface(host, iface, entry.get('twin_address')),
                          'peer': None})
    return {'host': str(host), 'mode': mode, 'ports': ports, 'links': links,
            'management': _management_ips(entry), 'mtu': entry.get('mtu'),
            'primary': str(entry.get('primary') or '')}


def twin_address(iface):
    """The second twin's default address: the same host part in the next subnet of the same size
    (10.0.0.1/24 -> 10.0.1.1/24), so that each twin has a subnet of its own and a pair needs one
    address per host in the inventory."""
    net = iface.network
    offset = int(iface.ip) - int(net.network_address)
    base = int(net.network_address) + net.num_addresses
    if base + net.num_addresses > 2 ** 32:
        raise ClusterLinkError('%s is in the last subnet of its size; there is no next one for the twin' % iface)
    return ipaddress.IPv4Interface('%s/%d' % (ipaddress.IPv4Address(base + offset), net.prefixlen))


def _twin_interface(host, primary, given):
    try:
        if given:
            text = str(given).strip()
            return _interface(text if '/' in text else '%s/%d' % (text, primary.network.prefixlen))
        return twin_address(primary)
    except ClusterLinkError as exc:
        raise ClusterLinkError('host %s: cluster_link_twin_address (gb10_cluster_twin_ip): %s. Fix: set '
                               'gb10_cluster_twin_ip to this node\'s address on the second twin, in a subnet '
                               'of its own (e.g. 10.0.1.1 beside 10.0.0.1/24).' % (host, exc))


def validate_cluster(hosts):
    """Cross-host checks over every host's normalize() result -> list of problems.

    Each problem names the host(s), the variable and the fix. Checks: one mode and one MTU for
    all, no address used twice, no cluster address that is (or shares a subnet with) a management
    address, one subnet for single/bond, and for mesh a full mesh whose every link subnet joins
    exactly the two hosts it names.
    """
    problems = []
    names = sorted(hosts)
    for key, var in (('mode', 'cluster_link_mode'), ('mtu', 'cluster_link_mtu')):
        values = dict((name, hosts[name].get(key)) for name in names)
        if len(set(values.values())) > 1:
            problems.append('hosts %s: %s differs (%s). Fix: set it once for the group.'
                            % (', '.join(names), var,
                               ', '.join('%s=%s' % (n, values[n]) for n in names)))
    owners = {}
    for name in names:
        for link in hosts[name]['links']:
            owners.setdefault(link['address'].ip, []).append(name)
    var_of = dict((name, 'cluster_link_mesh' if hosts[name]['mode'] == 'mesh'
                   else 'cluster_link_address (gb10_cluster_ip)') for name in names)
    for ip, on in sorted(owners.items()):
        if len(on) > 1:
            problems.append('hosts %s: cluster address %s is used %s (%s). Fix: give every host and '
                            'link its own address.'
                            % (' and '.join(sorted(set(on))), ip,
                               'by more than one host' if len(set(on)) > 1 else 'twice on one host',
                               var_of[on[0]]))
    for name in names:
        for mgmt in hosts[name]['management']:
            for other in names:
                for link in hosts[other]['links']:
                    if link['address'].ip == mgmt:
                        problems.append(
                            'host %s: its cluster address %s (%s) is the management address of host '
                            '%s (ansible_host). Fix: give the cluster link an address of its own, in a '
                            'subnet apart from the management network.' % (other, mgmt, var_of[other], name))
                    elif mgmt in link['address'].network:
                        problems.append(
                            'host %s: cluster subnet %s (%s) holds the management address %s of host '
                            '%s; SSH and the cluster link would share one subnet and the link could '
                            'take the management traffic (N5). Fix: use a separate subnet for the '
                            'cluster link (e.g. 10.0.0.0/24).'
                            % (other, link['address'].network, var_of[other], mgmt, name))
    modes = set(hosts[name]['mode'] for name in names)
    if modes == set(['mesh']):
        problems.extend(_validate_mesh(hosts))
    elif 'mesh' not in modes:
        nets = dict((name, hosts[name]['links'][0]['address'].network) for name in names)
        if len(set(nets.values())) > 1:
            problems.append('hosts %s: cluster addresses are in different subnets (%s); the peers of '
                            'a direct link or bond must share one. Fix: set gb10_cluster_ip and '
                            'gb10_cluster_prefix in one subnet for all.'
                            % (', '.join(names), ', '.join('%s=%s' % (n, nets[n]) for n in names)))
        if modes == set(['pair']):
            problems.extend(_validate_twins(hosts, names, nets))
    return _unique(problems)


def _validate_twins(hosts, names, nets):
    """Pair: the second twins share one subnet, and it is not the first twins' (each twin its
    own subnet, or the kernel routes both over one of them)."""
    problems = []
    twins = dict((name, hosts[name]['links'][1]['address'].network) for name in names)
    if len(set(twins.values())) > 1:
        problems.append('hosts %s: the second twins\' addresses are in different subnets (%s). Fix: set '
                        'gb10_cluster_twin_ip in one subnet for all (or leave it unset: the next subnet '
                        'after gb10_cluster_ip\'s).'
                        % (', '.join(names), ', '.join('%s=%s' % (n, twins[n]) for n in names)))
    for name in names:
        if twins[name].overlaps(nets[name]):
            problems.append('host %s: the twin address %s is in the cluster subnet %s; each twin of the '
                            'pair needs a subnet of its own. Fix: set gb10_cluster_twin_ip in another '
                            'subnet (e.g. the next one) or leave it unset.'
                            % (name, hosts[name]['links'][1]['address'], nets[name]))
    return problems


def _unique(items):
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _validate_mesh(hosts):
    problems = []
    names = sorted(hosts)
    if len(names) < 3:
        problems.append('hosts %s: mode mesh is for three nodes cabled without a switch (N6); %d '
                        'host(s) are in the play. Fix: use mode single or bond for a pair.'
                        % (', '.join(names), len(names)))
    subnets = {}
    for name in names:
        peers = {}
        for link in hosts[name]['links']:
            peers.setdefault(link['peer'], []).append(link)
            subnets.setdefault(link['address'].network, set()).add((name, link['peer']))
        for peer in sorted(peers):
            if peer == name:
                problems.append('host %s: cluster_link_mesh names the host itself as a peer. Fix: '
                                'name the other nodes.' % name)
            elif peer not in hosts:
                problems.append('host %s: cluster_link_mesh names %s, which is not a host of this '
                                'play (%s). Fix: use inventory hostnames.'
                                % (name, peer, ', '.join(names)))
        missing = [other for other in names if other != name and other not in peers]
        if missing:
            problems.append('host %s: cluster_link_mesh has no link to %s; in a mesh every node is '
                            'cabled to every other (N6). Fix: add the port(s) and addresses of that '
                            'cable.' % (name, ', '.join(missing)))
        counts = set(len(items) for items in peers.values())
        if len(counts) > 1:
            problems.append('host %s: cluster_link_mesh has %s port(s) per peer; use the same number '
                            'to every peer (1, or 2 for both halves of each cable).'
                            % (name, ', '.join('%s=%d' % (p, len(v)) for p, v in sorted(peers.items()))))
    for net, pairs in sorted(subnets.items()):
        ends = set()
        for name, peer in pairs:
            ends.add(frozenset((name, peer)))
        members = sorted(set(name for name, unused_peer in pairs))
        if len(ends) > 1:
            problems.append('hosts %s: subnet %s is on more than one link; in a switchless mesh every '
                            'link has its own subnet or NCCL routes to the wrong peer (N6). Fix: give '
                            'each cable half its own subnet in cluster_link_mesh.'
                            % (', '.join(members), net))
        elif len(members) == 1:
            peer = next(iter(pairs))[1]
            if peer in hosts:
                problems.append('host %s: link subnet %s to %s has no matching address on %s. Fix: '
                                'set the same subnet in cluster_link_mesh.%s of host %s.'
                                % (members[0], net, peer, peer, members[0], peer))
    # NCCL tells the links apart by subnet at NCCL_IB_SUBNET_PREFIX_LEN, 24 bits by default
    # (NVIDIA/nccl src/transport/net_ib/connect.cc at v2.30.7-1): two links whose own subnets are
    # narrower than /24 and share their first 24 bits are one subnet to it, and it picks the wrong
    # HCA for a peer (N6).
    by_nccl = {}
    for net in subnets:
        seen = net.supernet(new_prefix=NCCL_SUBNET_PREFIX_LEN) if net.prefixlen > NCCL_SUBNET_PREFIX_LEN else net
        by_nccl.setdefault(seen, set()).add(net)
    for seen, nets in sorted(by_nccl.items()):
        if len(nets) > 1:
            problems.append('link subnets %s are one subnet to NCCL, which compares the first %d bits '
                            '(NCCL_IB_SUBNET_PREFIX_LEN) and would pick the wrong HCA for a peer (N6). Fix: give '
                            'each cable half its own /%d in cluster_link_mesh (e.g. 192.168.101.0/24, '
                            '192.168.102.0/24, ...).'
                            % (', '.join(str(n) for n in sorted(nets)), NCCL_SUBNET_PREFIX_LEN, NCCL_SUBNET_PREFIX_LEN))
    return problems


def peer_checks(hosts, name):
    """What this host verifies: [{iface: None|port, address, peer, peer_ip}] (iface filled later)."""
    me = hosts[name]
    checks = []
    if me['mode'] == 'mesh':
        for link in me['links']:
            peer = hosts.get(link['peer'])
            if not peer:
                continue
            for other in peer['links']:
                if other['peer'] == name and other['address'].network == link['address'].network:
                    checks.append({'port': link['port'], 'address': str(link['address']),
                                   'peer': link['peer'], 'peer_ip': str(other['address'].ip)})
    else:
        for index, link in enumerate(me['links']):
            for other in sorted(hosts):
                if other != name and index < len(hosts[other]['links']):
                    checks.append({'port': index, 'address': str(link['address']), 'peer': other,
                                   'peer_ip': str(hosts[other]['links'][index]['address'].ip)})
    return checks


def choose_ports(host, mode, ports, detected, existing, primary=''):
    """The ports this host uses -> list; ClusterLinkError when the count does not fit the mode.

    ports: 'detect' or a list; detected: detect_ports(); existing: net devices the host has;
    primary: gb10_cluster_iface, which a pair puts first (it carries the cluster address).
    """
    if mode == 'mesh':
        raise ClusterLinkError('choose_ports is not for mesh; its ports come from cluster_link_mesh')
    if ports == 'detect':
        chosen = list(detected)
        origin = 'detected (ACTIVE ConnectX-7 ports: %s)' % (', '.join(detected) or 'none')
    else:
        chosen = list(ports)
        origin = 'cluster_link_ports'
    if len(set(chosen)) != len(chosen):
        raise ClusterLinkError('host %s: cluster_link_ports names a port twice (%s). Fix: list each '
                               'port once.' % (host, ', '.join(chosen)))
    missing = [port for port in chosen if port not in existing]
    if missing:
        raise ClusterLinkError('host %s: cluster_link_ports names %s, which this host does not have '
                               '(it has %s). Fix: name the ConnectX-7 net devices `ibdev2netdev` shows.'
                               % (host, ', '.join(missing), ', '.join(sorted(existing)) or 'none'))
    if len(chosen) not in PORT_COUNTS[mode]:
        want = {'single': 'exactly one port'}.get(mode, 'the two ports of one ConnectX-7 cable (2)')
        raise ClusterLinkError(
            'host %s: mode %s uses %s but %d port(s) are %s: %s. Fix: set cluster_link_ports to %s, '
            'or cluster_link_mode to %s.'
            % (host, mode, want, len(chosen), origin, ', '.join(chosen) or 'none',
               'one port (e.g. [enp1s0f1np1])' if mode == 'single' else 'two ports (e.g. [enp1s0f1np1, enP2p1s0f1np1])',
               'pair or bond for two ports of one cable' if mode == 'single' else 'single for one port'))
    if mode == 'pair':
        # The twin on PCI domain 0 (enp1...) first, the one NVIDIA's guides address.
        chosen.sort(key=lambda port: (port.startswith('enP'), port))
    if mode == 'pair' and primary:
        if primary not in chosen:
            # N3: the classic mistake (lo, the management NIC) is named here, with the port to use.
            raise ClusterLinkError(
                'host %s: gb10_cluster_iface is %s, which is not one of the two ConnectX-7 ports the '
                'pair uses (%s, %s). Fix: set gb10_cluster_iface to %s (the port that carries '
                'gb10_cluster_ip; its twin gets gb10_cluster_twin_ip).'
                % (host, primary, ', '.join(chosen), origin, chosen[0]))
        chosen.remove(primary)
        chosen.insert(0, primary)
    return chosen


def mesh_ports(host, links, existing):
    ports = [link['port'] for link in links]
    dup = sorted(set(p for p in ports if ports.count(p) > 1))
    if dup:
        raise ClusterLinkError('host %s: cluster_link_mesh uses port %s on more than one link. Fix: '
                               'one port per cable half.' % (host, ', '.join(dup)))
    missing = [port for port in ports if port not in existing]
    if missing:
        raise ClusterLinkError('host %s: cluster_link_mesh names %s, which this host does not have (it '
                               'has %s). Fix: name the ConnectX-7 net devices `ibdev2netdev` shows.'
                               % (host, ', '.join(missing), ', '.join(sorted(existing)) or 'none'))
    if len(ports) not in PORT_COUNTS['mesh']:
        raise ClusterLinkError('host %s: mode mesh uses 2 or 4 ports (one or both halves of the cable '
                               'to each of two peers, N6) but cluster_link_mesh names %d: %s. Fix: one '
                               'or two entries per peer.' % (host, len(ports), ', '.join(ports)))
    return ports


def local_conflicts(host, used_ports, links, addresses, management, own=()):
    """Conflicts on this host: the management address on a port the link takes, a cluster address
    already on another interface than the link's own (``own``: its ports and bond).
    addresses: {ifname: [IPv4Interface]} from ``ip -j addr``."""
    problems = []
    for port in used_ports:
        for addr in addresses.get(port, []):
            if addr.ip in management:
                problems.append('host %s: port %s carries the management address %s (ansible_host / '
                                'default route); the cluster link would cut this SSH session. Fix: '
                                'set cluster_link_ports to the ConnectX-7 ports, never the management '
                                'NIC.' % (host, port, addr.ip))
    ours = set(used_ports) | set(own)
    for link in links:
        for name, addrs in sorted(addresses.items()):
            if name in ours:
                continue
            for addr in addrs:
                if addr.ip == link['address'].ip:
                    problems.append('host %s: cluster address %s is already on %s, which the cluster '
                                    'link does not use. Fix: remove it there, or choose another '
                                    'address.' % (host, addr.ip, name))
    return problems


def _names_device(text, name):
    """Whether a netplan file's text configures device name: as a device's key, by a match on its
    name or a set-name, or as a member of a bond or bridge. NetworkManager's own files (Ubuntu's
    NetworkManager writes /etc/netplan/90-NM-<uuid>.yaml) key a device by its connection,
    `NM-<uuid>:`, and name the interface only under `match: name: "<iface>"`."""
    quoted = r'["\']?%s["\']?' % re.escape(name)
    return bool(re.search(r'^\s*%s\s*:' % quoted, text, re.M)
                or re.search(r'^\s*(?:name|set-name)\s*:\s*%s\s*$' % quoted, text, re.M)
                or re.search(r'^\s*-\s*%s\s*$' % quoted, text, re.M)
                or re.search(r'interfaces\s*:\s*\[[^\]]*(?<![\w.-])%s(?![\w.-])' % quoted, text))


def other_file_conflicts(host, names, files):
    """Other netplan files that configure one of our devices -> problems.

    names: ports and the bond; files: {path: text}. netplan merges every file, so another file's
    settings for the same device would mix with ours.
    """
    problems = []
    for path in sorted(files):
        text = files[path]
        hits = [name for name in names if _names_device(text, name)]
        if hits:
            problems.append('host %s: %s also configures %s; netplan merges every file, so its settings '
                            'would mix with the cluster link\'s. Fix: remove %s from that file (or the '
                            'file), or choose other ports.'
                            % (host, path, ', '.join(hits), ' and '.join(hits)))
    return problems


def netplan_document(mode, ports, links, mtu=DEFAULT_MTU, bond_name='bond0', bond_parameters=None,
                     renderer='', optional=True):
    """The netplan document (a dict) for one host.

    links: normalize()['links'] with ports filled for mesh. Keys written (netplan YAML reference):
    network.version, network.renderer (only when given), ethernets.<if>.{dhcp4, dhcp6, mtu,
    addresses, optional}, bonds.<bond>.{interfaces, mtu, addresses, parameters}.
    """
    eth = {}
    doc = {'network': {'version': 2}}
    if renderer:
        doc['network']['renderer'] = renderer

    def base():
        item = {'dhcp4': False, 'dhcp6': False, 'mtu': mtu}
        if optional:
            item['optional'] = True
        return item

    if mode == 'single':
        item = base()
        item['addresses'] = [str(links[0]['address'])]
        eth[ports[0]] = item
        doc['network']['ethernets'] = eth
    elif mode == 'pair':
        # Each twin its own subnet, no route or gateway: the kernel reaches each peer twin over
        # the twin in its subnet.
        for port, link in zip(ports, links):
            item = base()
            item['addresses'] = [str(link['address'])]
            eth[port] = item
        doc['network']['ethernets'] = eth
    elif mode == 'bond':
        for port in ports:
            eth[port] = base()
        bond = {'interfaces': sorted(ports), 'dhcp4': False, 'dhcp6': False, 'mtu': mtu,
                'addresses': [str(links[0]['address'])]}
        if optional:
            bond['optional'] = True
        if bond_parameters:
            bond['parameters'] = dict(bond_parameters)
        doc['network']['ethernets'] = eth
        doc['network']['bonds'] = {bond_name: bond}
    else:
        for link in links:
            item = base()
            item['addresses'] = [str(link['address'])]
            eth[link['port']] = item
        doc['network']['ethernets'] = eth
    return doc


_PLAIN = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_./:+-]*$')
_ORDER = ('version', 'renderer', 'ethernets', 'bonds', 'interfaces', 'dhcp4', 'dhcp6', 'mtu',
          'addresses', 'optional', 'parameters')


def _scalar(value):
    if value is True:
        return 'true'
    if value is False:
        return 'false'
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in ('true', 'false', 'yes', 'no', 'on', 'off', 'null', '~') \
            and not re.match(r'^[0-9.+-]+$', text):
        return text
    return '"%s"' % text.replace('\\', '\\\\').replace('"', '\\"')


def _keys(mapping):
    known = [key for key in _ORDER if key in mapping]
    return known + sorted(key for key in mapping if key not in _ORDER)


def _emit(value, indent, lines):
    pad = '  ' * indent
    for key in _keys(value):
        item = value[key]
        if isinstance(item, dict):
            lines.append('%s%s:' % (pad, _scalar(key)))
            _emit(item, indent + 1, lines)
        elif isinstance(item, list):
            lines.append('%s%s: [%s]' % (pad, _scalar(key), ', '.join(_scalar(v) for v in item)))
        else:
            lines.append('%s%s: %s' % (pad, _scalar(key), _scalar(item)))


def render(doc):
    """The netplan document as YAML text, keys in a fixed order (the same input, the same bytes)."""
    lines = []
    _emit(doc, 0, lines)
    return HEADER + '\n'.join(lines) + '\n'


def plan(name, cluster, detected, existing, addresses, other_files, mtu=DEFAULT_MTU,
         bond_name='bond0', bond_parameters=None, renderer='', optional=True):
    """Everything the role needs for host ``name``.

    cluster: [{host, mode, ports, address, prefix, mesh, management, mtu}] for every host of the
    play; detected: detect_ports() here; existing: net devices here; addresses: {ifname:
    [IPv4Interface]} here; other_files: {path: text} of the other netplan files here.
    Returns {mode, ports, interfaces, checks, document, content, problems}.
    """
    hosts, problems = {}, []
    for entry in cluster:
        try:
            item = normalize(entry)
        except ClusterLinkError as exc:
            problems.append(str(exc))
            continue
        hosts[item['host']] = item
    if name not in hosts:
        if not problems:
            problems.append('host %s is not in the cluster list given to the planner' % name)
        return {'problems': _unique(problems)}
    if not MIN_MTU <= int(mtu) <= MAX_MTU:
        problems.append('host %s: cluster_link_mtu %s is outside %d..%d. Fix: leave it at 9000 (jumbo '
                        'frames, what the CX7 link runs at) or set it within that range.'
                        % (name, mtu, MIN_MTU, MAX_MTU))
    problems.extend(validate_cluster(hosts))
    me = hosts[name]
    ports, links = [], [dict(link) for link in me['links']]
    try:
        if me['mode'] == 'mesh':
            ports = mesh_ports(name, links, existing)
        else:
            ports = choose_ports(name, me['mode'], me['ports'], detected, existing, me['primary'])
    except ClusterLinkError as exc:
        problems.append(str(exc))
    # The interface that carries each link of single, pair and bond (by index in links).
    iface_of_link = {}
    if me['mode'] == 'bond':
        iface_of_link[0] = bond_name
    elif me['mode'] != 'mesh':
        iface_of_link = dict(enumerate(ports))
    for index, link in enumerate(links):
        if me['mode'] != 'mesh':
            link['port'] = iface_of_link.get(index)
    checks = peer_checks(hosts, name)
    for check in checks:
        port = check.pop('port')
        check['iface'] = port if me['mode'] == 'mesh' else iface_of_link.get(port)
    names = list(ports) + ([bond_name] if me['mode'] == 'bond' else [])
    problems.extend(local_conflicts(name, ports, links, addresses, me['management'], names))
    problems.extend(other_file_conflicts(name, names, other_files))
    interfaces = [{'iface': link['port'], 'address': str(link['address']), 'peer': link['peer']}
                  for link in links if link['port']]
    result = {'mode': me['mode'], 'ports': ports, 'interfaces': interfaces, 'checks': checks,
              'problems': _unique(problems), 'document': None, 'content': None}
    if ports and len(interfaces) == len(links):
        doc = netplan_document(me['mode'], ports, links, int(mtu), bond_name, bond_parameters,
                               renderer, optional)
        result['document'] = doc
        result['content'] = render(doc)
    return result


def live_drift(interfaces, ports, links, mtu):
    """What differs between the plan and the node as it runs -> list (empty: nothing to apply).

    interfaces: plan()['interfaces']; ports: plan()['ports']; links: the parsed JSON of
    `ip -j addr` (each with ifname, mtu, addr_info).
    """
    live = dict((link.get('ifname'), link) for link in links if isinstance(link, dict))
    drift = []
    for item in interfaces:
        got = live.get(item['iface'])
        if got is None:
            drift.append('%s does not exist yet' % item['iface'])
            continue
        have = ['%s/%s' % (a.get('local'), a.get('prefixlen')) for a in got.get('addr_info', [])
                if a.get('family') == 'inet']
        if item['address'] not in have:
            drift.append('%s has %s, not %s' % (item['iface'], ', '.join(have) or 'no IPv4 address',
                                                item['address']))
    for name in list(ports) + [item['iface'] for item in interfaces]:
        got = live.get(name)
        if got is not None and got.get('mtu') != int(mtu):
            drift.append('%s runs at MTU %s, not %s' % (name, got.get('mtu'), mtu))
    return _unique(drift)
