# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""python -m bench controller-scaling [--sizes N ...] [--json FILE]: run a benchmark, print a
Markdown table, write the raw numbers as JSON (default tests/output/bench/<name>.json).
The copy-throughput and deploy-time benchmarks of issue 7 are not written yet (BENCHMARKS.md)."""
import argparse
import json
import os
import sys

from bench.hosts import OUT


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m bench', description=__doc__)
    parser.add_argument('name', choices=['controller-scaling'])
    parser.add_argument('--json', default=None)
    parser.add_argument('--sizes', type=int, nargs='+', default=None,
                        help='controller-scaling: host counts (default 2 4 8 16)')
    args = parser.parse_args(argv)
    from bench import controller_scaling as bench
    result = bench.run(tuple(args.sizes or (2, 4, 8, 16)))
    os.makedirs(OUT, exist_ok=True)
    path = args.json or os.path.join(OUT, '%s.json' % args.name)
    with open(path, 'w') as handle:
        json.dump(result, handle, indent=2)
    print(bench.table(result))
    print('json: %s' % path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
