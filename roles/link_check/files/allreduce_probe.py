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
    args = parser.parse_args(argv)
    if args.world_size < 1 or not 0 <= args.rank < args.world_size:
        parser.error('need 0 <= rank < world-size')
    if args.iters < 1 or args.warmup < 0 or args.size_mb <= 0:
        parser.error('need iters >= 1, warmup >= 0, size-mb > 0')
    return args


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
    if args.backend == 'nccl':
        version = torch.cuda.nccl.version()
        result['nccl'] = '.'.join(str(part) for part in version) if isinstance(version, tuple) else str(version)
    return result


def main(argv=None):
    args = parse_args(argv)
    result = run(args)
    sys.stdout.write(PREFIX + json.dumps(result, sort_keys=True) + '\n')
    sys.stdout.flush()
    return 0 if result['correct'] else 1


if __name__ == '__main__':
    sys.exit(main())
