# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""python -m bench.plot [--scaling FILE] [--copy FILE] [--out FILE]: draw the controller-scaling
and copy-throughput results (the JSON that `python -m bench ...` writes) into one PNG for
BENCHMARKS.md. Needs matplotlib (pip install matplotlib; not part of the collection)."""
import argparse
import json
import os

from bench.hosts import TOP

DOCS = os.path.join(TOP, 'docs', 'bench')


def draw(scaling, copy, out):
    import matplotlib
    matplotlib.use('Agg')  # no display on a CI machine
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={'width_ratios': [1, 1.4]})
    rows = scaling['rows']
    hosts = [r['hosts'] for r in rows]
    left.plot(hosts, [r['first_run_s'] for r in rows], 'o-', label='first run')
    left.plot(hosts, [r['noop_rerun_s'] for r in rows], 's-', label='no-op re-run (changed=0)')
    base = rows[0]
    left.plot(hosts, [base['noop_rerun_s'] * h / base['hosts'] for h in hosts], ':', color='grey',
              label='no-op, if linear in hosts')
    left.set_xscale('log', base=2)
    left.set_xticks(hosts)
    left.set_xticklabels([str(h) for h in hosts])
    left.set_xlabel('light test hosts (forks %s)' % scaling['settings']['forks'])
    left.set_ylabel('wall time (s)')
    left.set_title('Controller scaling: bench/playbooks/host_config.yml')
    left.legend()
    left.grid(alpha=0.3)

    bars = copy['rows']
    colors = {'link': 'tab:grey', 'raw copy': 'tab:blue', 'rsync': 'tab:orange', 'model_sync': 'tab:green',
              'cpu': 'tab:purple'}
    legend = {'link': 'link (iperf3)', 'raw copy': 'plain TCP copy to disk', 'rsync': 'rsync daemon',
              'model_sync': 'model_sync role, pull task', 'cpu': 'hashing only, no copy'}
    y = range(len(bars))
    right.barh(y, [r['mb_s'] for r in bars], color=[colors.get(r['kind'], 'tab:purple') for r in bars])
    right.set_yticks(list(y))
    right.set_yticklabels([r['method'] for r in bars])
    right.invert_yaxis()
    for i, r in enumerate(bars):
        right.text(r['mb_s'], i, ' %.0f MB/s (%.0f%%)' % (r['mb_s'], 100 * r['of_link']), va='center')
    right.set_xlim(0, max(r['mb_s'] for r in bars) * 1.35)
    kinds = [k for k in colors if any(r['kind'] == k for r in bars)]
    right.legend([Patch(color=colors[k]) for k in kinds], [legend[k] for k in kinds], loc='center right')
    right.set_xlabel('MB/s (10^6 bytes/s) of a %.1f GiB model in %d files; %% = of the link'
                     % (copy['bytes'] / 1024 ** 3, copy['files']))
    right.set_title('Model copy between two test hosts')
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m bench.plot', description=__doc__)
    parser.add_argument('--scaling', default=os.path.join(DOCS, 'controller-scaling.json'))
    parser.add_argument('--copy', default=os.path.join(DOCS, 'copy-throughput-overlap.json'))
    parser.add_argument('--out', default=os.path.join(DOCS, 'issue7.png'))
    args = parser.parse_args(argv)
    with open(args.scaling) as handle:
        scaling = json.load(handle)
    with open(args.copy) as handle:
        copy = json.load(handle)
    print(draw(scaling, copy, args.out))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
