# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""python -m bench {controller-scaling,copy,deploy} [--json FILE]: run one benchmark, print a
Markdown table, write the raw numbers as JSON (default tests/output/bench/<name>.json)."""
import argparse
import json
import os
import sys

from bench.hosts import OUT


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m bench', description=__doc__)
    parser.add_argument('name', choices=['controller-scaling', 'copy', 'deploy'])
    parser.add_argument('--json', default=None)
    parser.add_argument('--sizes', type=int, nargs='+', default=None,
                        help='controller-scaling: host counts (default 2 4 8 16)')
    parser.add_argument('--gib', type=float, default=None, help='copy: GiB to copy (default 4)')
    args = parser.parse_args(argv)
    if args.name == 'controller-scaling':
        from bench import controller_scaling as bench
        result = bench.run(tuple(args.sizes or (2, 4, 8, 16)))
    elif args.name == 'copy':
        from bench import copy_throughput as bench
        result = bench.run(args.gib or 4.0)
    else:
        from bench import deploy_times as bench
        result = bench.run()
    os.makedirs(OUT, exist_ok=True)
    path = args.json or os.path.join(OUT, '%s.json' % args.name)
    with open(path, 'w') as handle:
        json.dump(result, handle, indent=2)
    print(bench.table(result))
    print('json: %s' % path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
