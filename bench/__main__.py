# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""python -m bench NAME [options] [--json FILE]: run a benchmark, print a Markdown table, write
the raw numbers as JSON (default tests/output/bench/<name>.json). Names:
controller-scaling (light hosts), copy-throughput (two light hosts), copy-local (model_sync's
pull on this machine over loopback: no Docker, for a machine with many cores), deploy-time and
watchdog, executors (take the simulated cluster: run them only when nobody else uses it), newcomer (stops
this machine's Docker engine for about 15 minutes: run it only where nothing else uses Docker), mutation
(the unit tests' mutation score with cosmic-ray: it edits the checkout's files in place while it runs)."""
import argparse
import importlib
import json
import os
import sys

# Not bench.hosts.OUT: that module needs the Docker SDK, which copy-local does without.
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'tests', 'output', 'bench')
MODULES = {
    'controller-scaling': 'bench.controller_scaling',
    'copy-local': 'bench.copy_local',
    'copy-throughput': 'bench.copy_throughput',
    'deploy-time': 'bench.deploy_time',
    'executors': 'bench.executors',
    'mutation': 'bench.mutation',
    'newcomer': 'bench.newcomer',
    'watchdog': 'bench.watchdog',
}


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m bench', description=__doc__)
    parser.add_argument('name', choices=sorted(MODULES))
    parser.add_argument('--json', default=None)
    parser.add_argument('--sizes', type=int, nargs='+', default=[2, 4, 8, 16],
                        help='controller-scaling: host counts (default 2 4 8 16)')
    parser.add_argument('--gib', type=float, default=4,
                        help='copy-throughput, copy-local: model size in GiB (default 4)')
    parser.add_argument('--file-mib', type=int, default=512,
                        help='copy-throughput, copy-local: size of each model file in MiB (default 512)')
    parser.add_argument('--streams', type=int, nargs='+', default=[1, 4, 8],
                        help='copy-throughput, copy-local: model_sync_streams values (default 1 4 8)')
    parser.add_argument('--repeat', type=int, default=2,
                        help='controller-scaling, copy-throughput: tries per figure (no-op re-runs, '
                        'copies), the best counts (default 2); watchdog: stalls, then power cuts, in a row')
    parser.add_argument('--split-cpus', action='store_true',
                        help='copy-local: source end on one half of the CPUs, pulling end on the other')
    parser.add_argument('--nodes', type=int, nargs='+', choices=[2, 3], default=[2, 3],
                        help='deploy-time: simulated cluster sizes (default 2 3)')
    parser.add_argument('--faults', nargs='+', choices=['hang', 'power', 'leak'], default=['hang', 'power', 'leak'],
                        help='watchdog: the faults to inject, in that order (default all three)')
    parser.add_argument('--idle-s', type=int, default=30,
                        help='executors: seconds each idle cluster is measured over (default 30)')
    parser.add_argument('--tokens', type=int, default=64,
                        help='executors: tokens each decode request generates (default 64)')
    parser.add_argument('--modules', nargs='+', default=None,
                        help='mutation: module_utils modules (or watchdog, leak_reboot) to mutate (default all)')
    parser.add_argument('--cosmic-ray', default=None, help='mutation: the cosmic-ray program (default: on PATH)')
    parser.add_argument('--functions', nargs='+', default=None,
                        help='mutation: mutate only these functions or methods of the module (e.g. Watchdog.recover)')
    parser.add_argument('--mutant-timeout-s', type=float, default=120,
                        help='mutation: seconds the tests of one mutant may run (default 120)')
    args = parser.parse_args(argv)
    bench = importlib.import_module(MODULES[args.name])
    if args.name == 'controller-scaling':
        result = bench.run(tuple(args.sizes), args.repeat)
    elif args.name == 'copy-throughput':
        result = bench.run(args.gib, args.file_mib, tuple(args.streams), args.repeat)
    elif args.name == 'copy-local':
        result = bench.run(args.gib, args.file_mib, tuple(args.streams), args.repeat, args.split_cpus)
    elif args.name == 'watchdog':
        result = bench.run(args.repeat, faults=tuple(args.faults))
    elif args.name == 'executors':
        result = bench.run(args.idle_s, args.tokens)
    elif args.name == 'newcomer':
        result = bench.run()
    elif args.name == 'mutation':
        result = bench.run(args)
    else:
        result = bench.run(tuple(args.nodes))
    os.makedirs(OUT, exist_ok=True)
    path = args.json or os.path.join(OUT, '%s.json' % args.name)
    with open(path, 'w') as handle:
        json.dump(result, handle, indent=2)
    print(bench.table(result))
    print('json: %s' % path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
