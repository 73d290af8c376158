# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bus bandwidth of an all-reduce, and the probe's output (rule N5: measure the data path).

The arithmetic is nccl-tests' (NVIDIA/nccl-tests, doc/PERFORMANCE.md, "Performance reported by
NCCL tests"): for an all-reduce of S bytes that takes t seconds on n ranks,

    algbw = S / t
    busbw = algbw * 2 * (n - 1) / n

"we need 2(n-1) data transfers (x number of elements) to perform an allReduce operation", n links
of bandwidth B, so t = (S/B) * (2(n-1)/n) at best and B = S/t * (2(n-1)/n): a figure comparable with
one rank's link bandwidth whatever the number of ranks. One rank moves nothing over a link: its
busbw is 0.

The reference is plain TCP between the same cluster addresses (each rank to rank 0, one at a time,
the probe's "tcp" entry): a collective far under it took another wire than the cluster link.

roles/link_check/files/allreduce_probe.py (the program that runs in the serving image, which must not
import the collection) carries the same formula; tests/unit compares the two.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

PROBE_PREFIX = 'GB10_LINK_PROBE '


class LinkProbeError(ValueError):
    """Figures or probe output that cannot be read as an all-reduce measurement."""


def bus_bandwidth(nbytes, seconds, world_size):
    """(algbw, busbw) in bytes per second for an all-reduce of nbytes that took seconds on
    world_size ranks: algbw = S/t, busbw = algbw * 2*(n-1)/n (nccl-tests, doc/PERFORMANCE.md)."""
    if seconds <= 0:
        raise LinkProbeError('seconds must be positive, got %r' % (seconds,))
    if world_size < 1:
        raise LinkProbeError('world_size must be at least 1, got %r' % (world_size,))
    if nbytes < 0:
        raise LinkProbeError('nbytes must not be negative, got %r' % (nbytes,))
    algbw = nbytes / seconds
    return algbw, algbw * 2.0 * (world_size - 1) / world_size


def gbit_per_s(bytes_per_s):
    """Bytes per second -> Gb/s (10^9 bits), the unit link speeds are given in."""
    return bytes_per_s * 8 / 1e9


def parse_probe_output(text):
    """The JSON results the probe printed ("GB10_LINK_PROBE {...}" lines), in order of rank."""
    results = []
    for line in (text or '').splitlines():
        start = line.find(PROBE_PREFIX)
        if start < 0:
            continue
        try:
            result = json.loads(line[start + len(PROBE_PREFIX):])
        except ValueError as exc:
            raise LinkProbeError('unreadable probe line %r: %s' % (line.strip(), exc))
        for key in ('rank', 'world_size', 'bytes', 'seconds_per_iter'):
            if key not in result:
                raise LinkProbeError('probe line without %s: %r' % (key, line.strip()))
        results.append(result)
    if not results:
        raise LinkProbeError('no "%s" line in the probe output' % PROBE_PREFIX.strip())
    return sorted(results, key=lambda result: result['rank'])


def rated_floor(transport, hca_count, floor_gbit, share, twin_gbit, bonded=False):
    """The floor for what the link is rated for -> (floor Gb/s, why or None).

    A ConnectX-7 twin of a Spark is a PCIe x4 link of twin_gbit (100) Gb/s. roce: NCCL runs over
    every HCA in NCCL_IB_HCA, so the link is rated hca_count x twin_gbit (one twin 100, the pair
    200); roce_ring: a node's HCAs are split over its two peers, and a ring all-reduce moves
    through one cable at a time, rated hca_count / 2 x twin_gbit. The floor is the larger of
    floor_gbit and share x that rating, so a link at half its rate (one twin of a pair carrying
    everything) is refused with both figures. bonded: the twins bonded into one interface (cluster
    link mode bond), rated as one twin whatever NCCL_IB_HCA names: RDMA over a bond of the two
    PCIe halves runs over one of them at a time, and the field's working bond0 measured 109 Gb/s
    RDMA against ~190 over both twins unbonded. socket, no HCA or share 0: floor_gbit as given.
    """
    if transport not in ('roce', 'roce_ring') or not hca_count or not share:
        return float(floor_gbit), None
    if bonded:
        links = 1.0
    else:
        links = hca_count / 2.0 if transport == 'roce_ring' else float(hca_count)
    rated = links * twin_gbit
    if share * rated <= floor_gbit:
        return float(floor_gbit), None
    return share * rated, ('%g x %g Gb/s rated: %s%s'
                           % (share, rated,
                              'a bond of the twins, RDMA over one at a time, %g Gb/s' % twin_gbit if bonded
                              else '%d RoCE HCA(s) x %g Gb/s' % (hca_count, twin_gbit),
                              ', half of them per peer cable' if transport == 'roce_ring' and not bonded else ''))


def below_floor(result, floor_gbit, why=None):
    """None when the result's busbw reaches floor_gbit (Gb/s), else why not, with both figures
    (and where the floor comes from, when it is a share of the link's rating)."""
    busbw = bus_bandwidth(result['bytes'], result['seconds_per_iter'], result['world_size'])[1]
    got = gbit_per_s(busbw)
    if got >= floor_gbit:
        return None
    return ('all-reduce busbw %.1f Gb/s over %d ranks (%d bytes in %.4f s) is below the floor of '
            '%.1f Gb/s%s' % (got, result['world_size'], result['bytes'], result['seconds_per_iter'], floor_gbit,
                             ' (%s)' % why if why else ''))


def tcp_reference(result):
    """(lowest plain-TCP Gb/s to rank 0 over the probe's peers or None, every peer's error)."""
    tcp = result.get('tcp') or {}
    figures = [peer['gbit_s'] for peer in tcp.get('peers', []) if 'gbit_s' in peer]
    errors = ['rank %s (%s): %s' % (peer.get('rank'), peer.get('host'), peer['error'])
              for peer in tcp.get('peers', []) if 'error' in peer]
    return (min(figures) if figures else None), errors


def below_tcp_share(result, share):
    """None when the result's busbw reaches share x the plain-TCP reference (or there is none, or
    share is 0), else why not, with both figures."""
    reference = tcp_reference(result)[0]
    if not share or reference is None:
        return None
    got = gbit_per_s(bus_bandwidth(result['bytes'], result['seconds_per_iter'], result['world_size'])[1])
    if got >= share * reference:
        return None
    return ('all-reduce busbw %.1f Gb/s is below %g x %.1f Gb/s, the plain TCP figure between the same '
            'cluster addresses' % (got, share, reference))
