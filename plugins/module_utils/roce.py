# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RoCE facts of a GB10 node from sysfs, the NCCL/Gloo environment they call for, and the checks
that catch NCCL on the wrong wire (rules N1-N6).

sysfs layout read (all below <sys_root>/class/):
  infiniband/<dev>/ports/<p>/state            "4: ACTIVE"
  infiniband/<dev>/ports/<p>/rate             "200 Gb/sec (4X HDR)"
  infiniband/<dev>/ports/<p>/gids/<n>          "0000:0000:0000:0000:0000:ffff:c0a8:6401"
  infiniband/<dev>/ports/<p>/gid_attrs/types/<n>  "RoCE v2" | "IB/RoCE v1" (unreadable if unused)
  infiniband/<dev>/ports/<p>/gid_attrs/ndevs/<n>  net device of that GID
  infiniband/<dev>/device/net/<iface>          the port's own net device (as ibdev2netdev shows)
  net/<iface>/{speed,mtu,operstate}            speed in Mb/s, -1 or unreadable when down
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import json
import os

TRANSPORTS = ('roce', 'roce_ring', 'socket')
ZERO_GID = '0000:0000:0000:0000:0000:0000:0000:0000'
# A ConnectX-7 cluster port runs at 200 Gb/s; the 10 GbE and 1 GbE NICs are management links
# where NCCL gave ~6 tok/s on TP=3 (rule N5).
DEFAULT_MIN_SPEED_MBPS = 100000
# NCCL_IB_TIMEOUT 22 and RoCE v2 from the field reports (rule N1). NCCL_NET=IB as sparkrun sets it
# for RoCE: NCCL then uses the IB/RoCE network or fails at init ("no network" in a container without
# the verbs devices), instead of falling back to sockets on the same interface and running ~20x
# slower without a word (N1, N5).
ROCE_COMMON_ENV = {
    'NCCL_IB_DISABLE': '0',
    'NCCL_NET': 'IB',
    'NCCL_NET_PLUGIN': 'none',
    'NCCL_IB_ROCE_VERSION_NUM': '2',
    'NCCL_IB_TIMEOUT': '22',
    'NCCL_NET_GDR_LEVEL': '0',  # rule N2: mandatory on GB10
}
# Every transport: NCCL_IGNORE_CPU_AFFINITY=1, as the community launcher (eugr/spark-vllm-docker)
# and sparkrun set it on Sparks: NCCL then does not pin its threads to the CPU set its topology
# detection gives the GPU, which on the GB10's ten big and ten little cores of one socket is a guess
# (N1).
COMMON_ENV = {'NCCL_IGNORE_CPU_AFFINITY': '1'}


# What a container needs for NCCL to open the RoCE devices (N1): the verbs device nodes,
# IPC_LOCK to pin memory and no memlock limit for the registered buffers. Without them NCCL falls
# back to sockets inside the container however the host is set up. NVIDIA's two-Spark guides pass
# `--ulimit memlock=-1 --device /dev/infiniband`; the community's launchers add
# `--cap-add=IPC_LOCK` (or run --privileged). nofile: Ray opens a socket per worker connection.
RDMA_DEVICE_DIR = '/dev/infiniband'
RDMA_CONTAINER = {
    'devices': [RDMA_DEVICE_DIR + ':' + RDMA_DEVICE_DIR + ':rwm'],
    'capabilities': ['IPC_LOCK'],
}
UNLIMITED = -1
# memlock in bytes, -1 unlimited (what NCCL's registered buffers want, NVIDIA's --ulimit memlock=-1).
RDMA_LIMITS = {'memlock': UNLIMITED, 'nofile': 1048576}


def rdma_limits(limits=None):
    """RDMA_LIMITS with the given entries instead (gb10_rdma_limits: a machine whose Docker cannot
    grant these, the simulation's, names what it can) -> {memlock, nofile}; RoceError when bad."""
    merged = dict(RDMA_LIMITS)
    for key, value in (limits or {}).items():
        if key not in RDMA_LIMITS:
            raise RoceError('unknown limit %r; known: %s' % (key, ', '.join(sorted(RDMA_LIMITS))))
        try:
            merged[key] = int(value)
        except (TypeError, ValueError):
            raise RoceError('limit %s must be a whole number, got %r' % (key, value))
    if merged['memlock'] != UNLIMITED and merged['memlock'] <= 0:
        raise RoceError('memlock must be -1 (unlimited) or a number of bytes above 0, got %r' % merged['memlock'])
    if merged['nofile'] <= 0:
        raise RoceError('nofile must be above 0, got %r' % merged['nofile'])
    return merged


def container_rdma(transport, privileged=False, limits=None):
    """docker_container options (devices, capabilities, ulimits, privileged) that let NCCL in a
    container use RoCE for this transport: {} for socket, which needs none of them. privileged
    (opt-in) adds --privileged on top, as some community launchers run. limits: rdma_limits()."""
    if transport not in TRANSPORTS:
        raise RoceError('transport must be one of %s, got %r' % (', '.join(TRANSPORTS), transport))
    limits = rdma_limits(limits)
    if transport == 'socket':
        return {}
    options = dict((key, list(value)) for key, value in RDMA_CONTAINER.items())
    options['ulimits'] = ['%s:%d:%d' % (key, limits[key], limits[key]) for key in ('memlock', 'nofile')]
    if privileged:
        options['privileged'] = True
    return options


def container_rdma_missing(transport, container, limits=None):
    """What a container (docker inspect's HostConfig: Devices, CapAdd, Ulimits, Privileged) lacks
    of container_rdma(transport, limits=limits): a list of short phrases, empty when it has all of
    it (or the transport needs none). A failed transport check names these as the likely cause."""
    if not container_rdma(transport, limits=limits):
        return []
    memlock = rdma_limits(limits)['memlock']
    host = container or {}
    if host.get('Privileged'):
        return []
    missing = []
    devices = [d.get('PathOnHost') for d in host.get('Devices') or []]
    if not [d for d in devices if d == RDMA_DEVICE_DIR or (d or '').startswith(RDMA_DEVICE_DIR + '/')]:
        missing.append('no %s device' % RDMA_DEVICE_DIR)
    if 'IPC_LOCK' not in [c.upper().replace('CAP_', '') for c in host.get('CapAdd') or []]:
        missing.append('no IPC_LOCK capability')
    limit = [u for u in host.get('Ulimits') or [] if u.get('Name') == 'memlock']
    if not limit or limit[0].get('Soft') != memlock:
        missing.append('memlock not unlimited' if memlock == UNLIMITED else 'memlock not %d' % memlock)
    return missing


class RoceError(ValueError):
    """sysfs or address input that cannot be read as RoCE facts."""


def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except (IOError, OSError):
        return []


def gid_ipv4(gid):
    """"0000:...:ffff:c0a8:6401" -> "192.168.100.1"; None for any other GID."""
    try:
        addr = ipaddress.IPv6Address(gid)
    except ValueError:
        return None
    return str(addr.ipv4_mapped) if addr.ipv4_mapped else None


def parse_rate(text):
    """"200 Gb/sec (4X HDR)" -> 200.0 (Gb/s); None when absent or unreadable."""
    try:
        return float(text.split()[0])
    except (AttributeError, IndexError, ValueError):
        return None


def read_pcie(device_dir):
    """The PCIe link of an RDMA device's function (<dev>/device is the PCI device's sysfs folder):
    its negotiated and its capable speed and width, as `lspci -vv` prints LnkSta and LnkCap. A DGX
    Spark's four ConnectX-7 functions each negotiate Gen5 x4 (32 GT/s; ServeTheHome, "The NVIDIA GB10
    ConnectX-7 200GbE Networking is Really Different"), one x4 link per QSFP twin, which is why one
    twin tops out near 100 Gb/s; an ASUS Ascent GX10's second endpoint negotiates x2 and halves that
    twin (forums.developer.nvidia.com/t/367853). None where sysfs has no link figures."""
    width = _int_or_none(_read(os.path.join(device_dir, 'current_link_width')))
    if width is None:
        return None
    return {'speed': _read(os.path.join(device_dir, 'current_link_speed')),
            'width': width,
            'max_speed': _read(os.path.join(device_dir, 'max_link_speed')),
            'max_width': _int_or_none(_read(os.path.join(device_dir, 'max_link_width')))}


def read_rdma(sys_root):
    """Every RDMA device port under <sys_root>/class/infiniband with its GIDs and its function's
    PCIe link."""
    base = os.path.join(sys_root, 'class', 'infiniband')
    ports = []
    for dev in _listdir(base):
        own_netdevs = _listdir(os.path.join(base, dev, 'device', 'net'))
        pcie = read_pcie(os.path.join(base, dev, 'device'))
        for port in _listdir(os.path.join(base, dev, 'ports')):
            pdir = os.path.join(base, dev, 'ports', port)
            state = _read(os.path.join(pdir, 'state')) or ''
            gids = []
            for index in _listdir(os.path.join(pdir, 'gids')):
                if not index.isdigit():
                    continue
                gid = _read(os.path.join(pdir, 'gids', index))
                if not gid or gid == ZERO_GID:
                    continue
                gids.append({
                    'index': int(index),
                    'gid': gid,
                    # unused entries refuse reads (EINVAL) of their type
                    'type': _read(os.path.join(pdir, 'gid_attrs', 'types', index)),
                    'ndev': _read(os.path.join(pdir, 'gid_attrs', 'ndevs', index)),
                    'ipv4': gid_ipv4(gid),
                })
            gids.sort(key=lambda item: item['index'])
            ports.append({
                'device': dev,
                'port': int(port) if port.isdigit() else port,
                'state': state,
                'active': state.split(':')[-1].strip().upper() == 'ACTIVE',
                'rate_gbps': parse_rate(_read(os.path.join(pdir, 'rate'))),
                'link_layer': _read(os.path.join(pdir, 'link_layer')),
                'netdev': own_netdevs[0] if own_netdevs else None,
                'gids': gids,
                'pcie': pcie,
            })
    return ports


def _int_or_none(text):
    try:
        value = int(text)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def read_netdevs(sys_root, names):
    """MTU, speed (Mb/s, None when down/unknown) and operstate of each named net device."""
    out = {}
    for name in names:
        ndir = os.path.join(sys_root, 'class', 'net', name)
        out[name] = {
            'mtu': _int_or_none(_read(os.path.join(ndir, 'mtu'))),
            'speed_mbps': _int_or_none(_read(os.path.join(ndir, 'speed'))),
            'operstate': _read(os.path.join(ndir, 'operstate')),
        }
    return out


def parse_ip_addr(text):
    """`ip -j addr` output -> {ifname: [ipaddress.IPv4Interface, ...]}."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RoceError('the address list is not the JSON of `ip -j addr`: %s' % exc)
    if not isinstance(data, list):
        raise RoceError('the address list must be the JSON list `ip -j addr` prints')
    out = {}
    for link in data:
        if not isinstance(link, dict) or 'ifname' not in link:
            raise RoceError('an `ip -j addr` entry has no ifname: %r' % (link,))
        addrs = out.setdefault(link['ifname'], [])
        for info in link.get('addr_info', []):
            if info.get('family') == 'inet':
                addrs.append(ipaddress.IPv4Interface('%s/%s' % (info['local'], info['prefixlen'])))
    return out


def _roce_v2_ipv4(port):
    return [gid for gid in port['gids'] if gid['ipv4'] and (gid['type'] or '') == 'RoCE v2']


def covering_network(networks):
    """The smallest IPv4 network holding all given networks (NCCL_IB_ADDR_RANGE takes one)."""
    nets = sorted(set(networks), key=lambda net: (int(net.network_address), net.prefixlen))
    prefix = min(net.prefixlen for net in nets)
    while prefix > 0:
        candidate = ipaddress.IPv4Network('%s/%d' % (nets[0].network_address, prefix), strict=False)
        if all(net.subnet_of(candidate) for net in nets):
            return candidate
        prefix -= 1
    return ipaddress.IPv4Network('0.0.0.0/0')


# The NCCL/Gloo environment, defined once: the file role nccl_env writes renders it
# (filter nccl_env_vars), roce_facts returns it, and drift names the rule of each variable from
# ENV_RULES. Which rule each variable serves (docs/rules.md); NCCL_IB_DISABLE and
# NCCL_IB_GID_INDEX depend on the transport (env_rule).
ENV_RULES = {
    'NCCL_SOCKET_IFNAME': 'N3', 'GLOO_SOCKET_IFNAME': 'N3', 'TP_SOCKET_IFNAME': 'N3',
    'UCX_NET_DEVICES': 'N3', 'OMPI_MCA_btl_tcp_if_include': 'N3', 'VLLM_HOST_IP': 'N3',
    'MASTER_ADDR': 'N3',
    'NCCL_NET_GDR_LEVEL': 'N2',
    'NCCL_NET_PLUGIN': 'N1', 'NCCL_IB_HCA': 'N1', 'NCCL_IB_ROCE_VERSION_NUM': 'N1',
    'NCCL_IB_TIMEOUT': 'N1', 'NCCL_IGNORE_CPU_AFFINITY': 'N1',
    'NCCL_P2P_DISABLE': 'N4',
    'NCCL_IB_ADDR_FAMILY': 'N6', 'NCCL_IB_ADDR_RANGE': 'N6', 'NCCL_IB_SUBNET_AWARE_ROUTING': 'N6',
    'NCCL_IB_MERGE_NICS': 'N6',
    # NCCL's init log, which the deploy reads to see the transport NCCL took (N5); part of pinning
    # NCCL's behaviour in the file (N1), so host prep puts it back without a restart.
    'NCCL_DEBUG': 'N1', 'NCCL_DEBUG_SUBSYS': 'N1',
}


def env_rule(key, wanted):
    """The rule a variable of the env file comes from; wanted = {KEY: VALUE} the deploy writes. A
    variable the deploy does not write is N1's (the file pins NCCL, N1)."""
    if key == 'NCCL_IB_DISABLE':
        return 'N4' if wanted.get(key) == '1' else 'N1'
    if key == 'NCCL_NET':
        return 'N4' if wanted.get(key) == 'Socket' else 'N1'
    if key == 'NCCL_IB_GID_INDEX':
        return 'N6' if 'NCCL_IB_ADDR_RANGE' in wanted else 'N1'
    return ENV_RULES.get(key, 'N1')


def socket_env(iface, address):
    """Socket names every transport needs (rule N3): the cluster interface, never loopback."""
    return {
        'NCCL_SOCKET_IFNAME': iface,
        'GLOO_SOCKET_IFNAME': iface,
        'TP_SOCKET_IFNAME': iface,
        'UCX_NET_DEVICES': iface,
        'OMPI_MCA_btl_tcp_if_include': iface,
        'VLLM_HOST_IP': address,
    }


def nccl_env(transport, iface, address, head_address=None, hcas=(), gid_index=None, addr_range=''):
    """The NCCL/Gloo environment of a node for the transport, as the env file holds it: socket
    names on the cluster interface (N3), the coordinator (MASTER_ADDR, when given), GDR off (N2),
    NCCL's init lines for the transport check (N5), and per transport the RoCE pinning (N1), the
    ring's per-link routing (N6) or sockets on purpose (N4)."""
    if transport not in TRANSPORTS:
        raise RoceError('transport must be one of %s, got %r' % (', '.join(TRANSPORTS), transport))
    env = socket_env(iface, address)
    if head_address is not None:
        env['MASTER_ADDR'] = head_address
    env.update({'NCCL_NET_PLUGIN': 'none', 'NCCL_NET_GDR_LEVEL': '0',
                'NCCL_DEBUG': 'INFO', 'NCCL_DEBUG_SUBSYS': 'INIT,NET'})
    env.update(COMMON_ENV)
    if transport == 'socket':
        env.update({'NCCL_IB_DISABLE': '1', 'NCCL_P2P_DISABLE': '1', 'NCCL_NET': 'Socket'})
        return env
    env.update(ROCE_COMMON_ENV)
    env['NCCL_IB_HCA'] = ','.join(hcas)
    if transport == 'roce':
        if gid_index is not None and int(gid_index) >= 0:
            env['NCCL_IB_GID_INDEX'] = str(int(gid_index))
    else:
        env.update({'NCCL_IB_ADDR_FAMILY': 'AF_INET', 'NCCL_IB_SUBNET_AWARE_ROUTING': '1',
                    'NCCL_IB_MERGE_NICS': '0'})
        if addr_range:
            env['NCCL_IB_ADDR_RANGE'] = addr_range
    return env


def plan(ports, addresses, netdevs, cluster_ip, transport='roce', cluster_iface=None,
         min_speed_mbps=DEFAULT_MIN_SPEED_MBPS):
    """Choose HCAs and GID for the transport, build the env and list what is wrong.

    ports: read_rdma(); addresses: parse_ip_addr(); netdevs: read_netdevs() for every named
    interface. Returns a dict; ``problems`` lists N5/N6 findings (empty when the wire is right).
    """
    if transport not in TRANSPORTS:
        raise RoceError('transport must be one of %s, got %r' % (', '.join(TRANSPORTS), transport))
    problems = []
    try:
        ip = ipaddress.IPv4Address(cluster_ip)
    except ValueError:
        raise RoceError('cluster_ip %r is not an IPv4 address (set gb10_cluster_ip)' % (cluster_ip,))
    iface, network = None, None
    for name, addrs in sorted(addresses.items()):
        for addr in addrs:
            if addr.ip == ip:
                iface, network = name, addr.network
    if iface is None:
        raise RoceError('no interface holds %s: set gb10_cluster_ip to this node\'s address on the '
                        'cluster link (addresses seen: %s)'
                        % (ip, ', '.join('%s=%s' % (n, ','.join(str(a) for a in v))
                                         for n, v in sorted(addresses.items()) if v) or 'none'))
    if cluster_iface and cluster_iface != iface:
        problems.append('gb10_cluster_iface is %s but %s is on %s' % (cluster_iface, ip, iface))
    if iface == 'lo' or ip.is_loopback:
        problems.append('the cluster address %s is on loopback: Gloo and NCCL would advertise '
                        '127.0.0.1 and peers get "Connection refused" (rule N3)' % ip)
    info = netdevs.get(iface, {})
    active = [port for port in ports if port['active']]
    result = {
        'transport': transport, 'cluster_iface': iface, 'cluster_ip': str(ip),
        'cluster_network': str(network), 'cluster_speed_mbps': info.get('speed_mbps'),
        'cluster_mtu': info.get('mtu'), 'hcas': [], 'gid_index': None, 'addr_range': None,
        'ring_links': [],
    }
    if transport in ('roce', 'socket'):
        speed = info.get('speed_mbps')
        if speed is None or speed < min_speed_mbps:
            problems.append('%s (%s) runs at %s, below %d Mb/s: a management NIC, not the 200 Gb/s '
                            'cluster link; NCCL over one gave ~6 tok/s (rule N5). Put gb10_cluster_ip '
                            'on the ConnectX-7 link' % (iface, ip, '%d Mb/s' % speed if speed else
                                                        'an unknown speed (link down?)',
                                                        min_speed_mbps))
    if transport != 'socket' and active:
        # A twin that holds an address (cluster_link put it there: mode pair or mesh) while its
        # RoCE port is not ACTIVE: NCCL_IB_HCA would list the other twins only, and NCCL would run
        # on half the link without a word (98 Gb/s on one HCA against 161 on both).
        for port in ports:
            held = addresses.get(port['netdev']) if port['netdev'] and not port['active'] else None
            if held:
                problems.append('%s (RoCE port %s/%s) holds %s but its port is %s, not ACTIVE: NCCL would run on '
                                'the other twin(s) only, half the link (rule N5). Fix: check that half of the '
                                'cable and the port (ibdev2netdev, ip link show %s), or take the address away on '
                                'purpose (cluster_link_mode single)'
                                % (port['netdev'], port['device'], port['port'],
                                   ', '.join(str(addr) for addr in held), port['state'] or 'unknown', port['netdev']))
    if transport != 'socket' and not active:
        problems.append('no RoCE port is ACTIVE (%s): NCCL would fall back to sockets silently '
                        '(rule N5); check cables and `ibdev2netdev`, or choose transport socket '
                        'on purpose (rule N4)'
                        % (', '.join('%s/%s %s' % (p['device'], p['port'], p['state'])
                                     for p in ports) or 'no RDMA device at all'))
    if transport == 'roce':
        # Every ACTIVE twin with a RoCE v2 IPv4 GID, whatever its subnet: the two halves
        # of one cable are two PCIe x4 links of ~100 Gb/s each, and NCCL reaches the port's 200
        # only with both in NCCL_IB_HCA (cluster_link's pair mode gives each its own subnet).
        chosen = []
        for port in active:
            gids = _roce_v2_ipv4(port)
            if gids:
                chosen.append((port, gids[0]))
        if active and not [gid for unused_port, gid in chosen
                           if ipaddress.IPv4Address(gid['ipv4']) in network]:
            problems.append('no ACTIVE RoCE port has a RoCE v2 IPv4 GID in %s: the cluster subnet is '
                            'not on a RoCE device, so NCCL would not use RDMA for it (rule N5)'
                            % network)
        indexes = sorted(set(gid['index'] for unused_port, gid in chosen))
        if len(indexes) > 1:
            problems.append('the RoCE v2 IPv4 GID index differs between HCAs (%s); NCCL_IB_GID_INDEX '
                            'is one number (rule N1)'
                            % ', '.join('%s=%d' % (p['device'], g['index']) for p, g in chosen))
        result['hcas'] = [port['device'] for port, unused_gid in chosen]
        result['gid_index'] = indexes[0] if indexes else None
    elif transport == 'roce_ring':
        links, unaddressed = [], []
        for port in active:
            gids = _roce_v2_ipv4(port)
            if not gids:
                unaddressed.append('%s/%s' % (port['device'], port['port']))
                continue
            addr = next((a for a in addresses.get(gids[0]['ndev'], [])
                         if str(a.ip) == gids[0]['ipv4']), None)
            net = addr.network if addr else ipaddress.IPv4Network(gids[0]['ipv4'] + '/32')
            speed = netdevs.get(gids[0]['ndev'], {}).get('speed_mbps')
            links.append({'hca': port['device'], 'iface': gids[0]['ndev'], 'ip': gids[0]['ipv4'],
                          'network': str(net), 'speed_mbps': speed})
        if unaddressed:
            problems.append('CX7 port(s) %s are Up but have no IPv4 address: each ring link needs '
                            'its own subnet (rule N6)' % ', '.join(unaddressed))
        by_net = {}
        for link in links:
            by_net.setdefault(link['network'], []).append(link['hca'])
        for net, hcas in sorted(by_net.items()):
            if len(hcas) > 1:
                problems.append('%s share the subnet %s: in a switchless ring every link has its own '
                                'subnet, or NCCL routes to the wrong peer (rule N6)'
                                % (' and '.join(hcas), net))
        count = len(active)
        if count not in (2, 4):
            problems.append('%d CX7 ports are Up: a ring node has 4 (both halves of both QSFP '
                            'ports), a pair 2 (rule N6)' % count)
        for link in links:
            if link['speed_mbps'] is not None and link['speed_mbps'] < min_speed_mbps:
                problems.append('ring link %s runs at %d Mb/s (rule N5)'
                                % (link['iface'], link['speed_mbps']))
        result['ring_links'] = links
        result['hcas'] = [link['hca'] for link in links]
        if links:
            result['addr_range'] = str(covering_network(
                [ipaddress.IPv4Network(link['network']) for link in links]))
    # The env file's variables for what was found (socket, N4: TCP on purpose, IB and P2P off so
    # NCCL does not probe them); the coordinator's address is the role's to add.
    result['env'] = nccl_env(transport, iface, str(ip), hcas=result['hcas'], gid_index=result['gid_index'],
                             addr_range=result['addr_range'] or '')
    result['problems'] = problems
    return result


def compare_nodes(facts):
    """Cross-node check (rule N5): {host: plan() result} -> list of disagreements.

    Nodes must agree on transport, GID index, HCA count and MTU, and (roce, socket) sit in one
    cluster subnet; in a ring each link subnet joins exactly two nodes.
    """
    problems = []
    hosts = sorted(facts)
    for key, what in (('transport', 'transport'), ('gid_index', 'RoCE v2 IPv4 GID index'),
                      ('cluster_mtu', 'cluster link MTU')):
        values = dict((host, facts[host].get(key)) for host in hosts)
        if len(set(values.values())) > 1:
            problems.append('nodes disagree on the %s: %s' % (
                what, ', '.join('%s=%s' % (host, values[host]) for host in hosts)))
    counts = dict((host, len(facts[host].get('hcas') or [])) for host in hosts)
    if len(set(counts.values())) > 1:
        problems.append('nodes use different numbers of RoCE HCAs: %s'
                        % ', '.join('%s=%d' % (host, counts[host]) for host in hosts))
    transports = set(facts[host].get('transport') for host in hosts)
    if transports == set(['roce_ring']):
        members = {}
        for host in hosts:
            for link in facts[host].get('ring_links') or []:
                members.setdefault(link['network'], set()).add(host)
        for net, on in sorted(members.items()):
            if len(on) != 2:
                problems.append('ring subnet %s is on %s: a cable joins exactly two nodes, so one '
                                'end is misaddressed or uncabled (rule N6)' % (net, ', '.join(sorted(on))))
    else:
        nets = dict((host, facts[host].get('cluster_network')) for host in hosts)
        if len(set(nets.values())) > 1:
            problems.append('nodes are not in one cluster subnet: %s (rule N5)'
                            % ', '.join('%s=%s' % (host, nets[host]) for host in hosts))
    return problems
