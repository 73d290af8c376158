# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""All-reduce bandwidth probe: one rank per node, the engine's own stack (rule N5).

Runs inside the profile's serving image with the env file the engine uses (/etc/gb10/nccl.env) and
the host network, so that the collective takes the same path the engine's tensor parallelism will:
NCCL over RoCE on Sparks, Gloo over the socket interface in the CPU simulation.

    python3 allreduce_probe.py --backend nccl --rank 0 --world-size 2 \
        --master-addr 10.0.0.1 --master-port 29555 --size-mb 256 --iters 5 --warmup 2

Every rank prints one JSON line (prefixed "GB10_LINK_PROBE "), with the same figures on every rank:
the slowest rank's seconds per iteration, algbw and busbw as nccl-tests defines them for
all-reduce (doc/PERFORMANCE.md of NVIDIA/nccl-tests):

    algbw = S / t                    (S bytes all-reduced, t seconds per iteration)
    busbw = algbw * 2 * (n - 1) / n  (n ranks; 0 for a single rank: nothing crosses a link)

and the reference it is read against: plain TCP between the same cluster addresses, with no
collective library in the way. Each rank other than 0 in turn sends --tcp-mb MiB over one TCP
connection to rank 0's address (port --tcp-port); the sender's time runs from the first byte to
rank 0's acknowledgement of the last. A collective far under this figure took another wire.

Self-contained on purpose (it runs in the serving image, where the collection is not installed):
plugins/module_utils/link_probe.py holds the same formula, and tests/unit compares the two.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import socket
import sys
import time

PREFIX = 'GB10_LINK_PROBE '


def bus_bandwidth(nbytes, seconds, world_size):
    """(algbw, busbw) in bytes per second for an all-reduce of nbytes taking seconds on world_size
    ranks (nccl-tests, doc/PERFORMANCE.md: busbw = algbw * 2*(n-1)/n)."""
    if seconds <= 0:
        raise ValueError('seconds must be positive, got %r' % (seconds,))
    if world_size < 1:
        raise ValueError('world_size must be at least 1, got %r' % (world_size,))
    algbw = nbytes / seconds
    return algbw, algbw * 2.0 * (world_size - 1) / world_size


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--backend', choices=('nccl', 'gloo'), required=True,
                        help='nccl on Sparks (RoCE or socket), gloo in the CPU simulation')
    parser.add_argument('--rank', type=int, required=True)
    parser.add_argument('--world-size', type=int, required=True)
    parser.add_argument('--master-addr', required=True, help="rank 0's cluster address")
    parser.add_argument('--master-port', type=int, default=29555)
    parser.add_argument('--size-mb', type=float, default=256.0,
                        help='MiB all-reduced per iteration (float32 elements)')
    parser.add_argument('--iters', type=int, default=5)
    parser.add_argument('--warmup', type=int, default=2)
    parser.add_argument('--device-index', type=int, default=-1,
                        help='CUDA device for nccl; -1: rank modulo the visible devices')
    parser.add_argument('--timeout-s', type=int, default=300,
                        help='rendezvous and collective timeout')
    parser.add_argument('--tcp-mb', type=float, default=64.0,
                        help='MiB each rank sends to rank 0 over plain TCP, the reference; 0: not measured')
    parser.add_argument('--tcp-port', type=int, default=0,
                        help="rank 0's port for the TCP reference; 0: --master-port + 1")
    args = parser.parse_args(argv)
    if args.world_size < 1 or not 0 <= args.rank < args.world_size:
        parser.error('need 0 <= rank < world-size')
    if args.iters < 1 or args.warmup < 0 or args.size_mb <= 0 or args.tcp_mb < 0:
        parser.error('need iters >= 1, warmup >= 0, size-mb > 0, tcp-mb >= 0')
    if not args.tcp_port:
        args.tcp_port = args.master_port + 1
    return args


def tcp_listen(addr, port, timeout_s):
    """Rank 0's listening socket for the TCP reference, on its cluster address."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((addr, port))
    listener.listen(1)
    listener.settimeout(timeout_s)
    return listener


def tcp_receive(listener):
    """Accept one sender, read everything it sends, acknowledge the end; the bytes read."""
    conn = listener.accept()[0]
    try:
        conn.settimeout(listener.gettimeout())
        total = 0
        while True:
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            total += len(chunk)
        conn.sendall(b'k')
        return total
    finally:
        conn.close()


def tcp_send(addr, port, nbytes, timeout_s):
    """Send nbytes to rank 0 over one TCP connection: seconds from the first byte to rank 0's
    acknowledgement of the last (so nothing left in a socket buffer counts as sent)."""
    block = b'\0' * (1 << 20)
    conn = socket.create_connection((addr, port), timeout=timeout_s)
    try:
        start = time.perf_counter()
        left = nbytes
        while left > 0:
            sent = conn.send(block[:min(left, len(block))])
            left -= sent
        conn.shutdown(socket.SHUT_WR)
        if conn.recv(1) != b'k':
            raise RuntimeError('rank 0 did not acknowledge the TCP reference')
        return time.perf_counter() - start
    finally:
        conn.close()


def tcp_reference(args, dist):
    """Every rank's plain-TCP figure to rank 0, one sender at a time (a barrier between them), the
    same list on every rank: [{rank, host, gbit_s} or {rank, host, error}] for ranks 1..n-1, and
    rank 0's own error first where it could not listen."""
    nbytes = int(args.tcp_mb * 1024 * 1024)
    # A rank that cannot reach the other stops waiting after a minute, well inside the collective's
    # own timeout, so every rank still meets at the next barrier.
    wait_s = min(args.timeout_s, 60)
    mine = None
    listener = None
    try:
        if args.rank == 0:
            try:
                listener = tcp_listen(args.master_addr, args.tcp_port, wait_s)
            except OSError as exc:
                mine = {'rank': 0, 'host': socket.gethostname(),
                        'error': 'listen on %s:%d: %s' % (args.master_addr, args.tcp_port, exc)}
        dist.barrier()
        for sender in range(1, args.world_size):
            if args.rank == 0 and listener is not None:
                try:
                    tcp_receive(listener)
                except OSError:
                    pass  # the sender reports its own error
            elif args.rank == sender:
                mine = {'rank': args.rank, 'host': socket.gethostname()}
                try:
                    seconds = tcp_send(args.master_addr, args.tcp_port, nbytes, wait_s)
                    mine['gbit_s'] = nbytes * 8 / seconds / 1e9
                except (OSError, RuntimeError) as exc:
                    mine['error'] = 'TCP to %s:%d: %s' % (args.master_addr, args.tcp_port, exc)
            dist.barrier()
    finally:
        if listener is not None:
            listener.close()
    gathered = [None] * args.world_size
    dist.all_gather_object(gathered, mine)
    return {'bytes': nbytes, 'port': args.tcp_port, 'peers': [peer for peer in gathered if peer]}


def run(args):
    import datetime

    import torch
    import torch.distributed as dist

    numel = max(1, int(args.size_mb * 1024 * 1024) // 4)
    nbytes = numel * 4
    if args.backend == 'nccl':
        count = torch.cuda.device_count()
        if count < 1:
            raise RuntimeError('backend nccl needs a CUDA device; torch sees none')
        index = args.device_index if args.device_index >= 0 else args.rank % count
        torch.cuda.set_device(index)
        device = torch.device('cuda', index)

        def sync():
            torch.cuda.synchronize(device)
    else:
        device = torch.device('cpu')

        def sync():
            return None

    dist.init_process_group(
        backend=args.backend,
        init_method='tcp://%s:%d' % (args.master_addr, args.master_port),
        rank=args.rank, world_size=args.world_size,
        timeout=datetime.timedelta(seconds=args.timeout_s))
    try:
        tensor = torch.ones(numel, dtype=torch.float32, device=device)
        for dummy in range(args.warmup):
            dist.all_reduce(tensor)
        sync()
        dist.barrier()
        start = time.perf_counter()
        for dummy in range(args.iters):
            dist.all_reduce(tensor)
        sync()
        elapsed = time.perf_counter() - start
        # every rank reports the slowest rank's time: the link is as fast as its slowest end
        slowest = torch.tensor([elapsed], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        elapsed = float(slowest.item())
        # sum of ones over n ranks, each iteration multiplies by n again: check one element
        expected = float(args.world_size) ** (args.warmup + args.iters)
        got = float(tensor[0].item())
        correct = abs(got - expected) <= 1e-3 * expected
        tcp = tcp_reference(args, dist) if args.tcp_mb > 0 and args.world_size > 1 else None
    finally:
        dist.destroy_process_group()

    per_iter = elapsed / args.iters
    algbw, busbw = bus_bandwidth(nbytes, per_iter, args.world_size)
    result = {
        'probe': 'allreduce',
        'backend': args.backend,
        'rank': args.rank,
        'world_size': args.world_size,
        'host': socket.gethostname(),
        'device': str(device),
        'bytes': nbytes,
        'iters': args.iters,
        'warmup': args.warmup,
        'seconds_per_iter': per_iter,
        'algbw_gbytes_s': algbw / 1e9,
        'busbw_gbytes_s': busbw / 1e9,
        'busbw_gbit_s': busbw * 8 / 1e9,
        'correct': correct,
        'torch': torch.__version__,
    }
    if tcp is not None:
        result['tcp'] = tcp
    if args.backend == 'nccl':
        result['nccl'], result['nccl_library'] = nccl_runtime()
    return result


def nccl_runtime():
    """(version, file) of the NCCL this process runs, asked of the library itself: the libnccl its
    all-reduce mapped (/proc/self/maps) and that library's ncclGetVersion() (rule N7). Not
    torch.cuda.nccl.version(), the version torch was built against: the image may load another
    one (pip's nvidia-nccl-cuXX or the system's). Role serving_image's files/image_probe.py reads it
    the same way; tests/unit compares the two."""
    import ctypes
    import os

    path = None
    with open('/proc/self/maps') as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6 and 'libnccl' in os.path.basename(fields[5].strip()):
                path = os.path.realpath(fields[5].strip())
                break
    if path is None:
        return None, None
    code = ctypes.c_int(0)
    if ctypes.CDLL(path).ncclGetVersion(ctypes.byref(code)) != 0:
        return None, path
    code = code.value
    major, minor, patch = (code // 10000, code % 10000 // 100, code % 100) if code >= 10000 else \
        (code // 1000, code % 1000 // 100, code % 100)
    return '%d.%d.%d' % (major, minor, patch), path


def main(argv=None):
    args = parse_args(argv)
    result = run(args)
    sys.stdout.write(PREFIX + json.dumps(result, sort_keys=True) + '\n')
    sys.stdout.flush()
    return 0 if result['correct'] else 1


if __name__ == '__main__':
    sys.exit(main())
