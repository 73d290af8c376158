# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""python -m bench.plot [--scaling FILE] [--copy FILE] [--local FILE] [--out FILE]: draw the
controller-scaling, copy-throughput and copy-local results (the JSON that `python -m bench ...`
writes) into one PNG for BENCHMARKS.md. Needs matplotlib (pip install matplotlib; not part of the
collection)."""
import argparse
import json
import os

from bench.hosts import TOP

DOCS = os.path.join(TOP, 'docs', 'bench')
COLORS = {'link': 'tab:grey', 'raw copy': 'tab:blue', 'rsync': 'tab:orange', 'model_sync': 'tab:green',
          'cpu': 'tab:purple'}
# copy-local names its rows by method only: 'TCP x8', 'TCP copy x8', 'rsync x8', 'SHA-256 x8', 'pull x8'.
LOCAL_KINDS = (('TCP copy', 'raw copy'), ('TCP', 'link'), ('rsync', 'rsync'), ('pull', 'model_sync'),
               ('SHA-256', 'cpu'))


def copy_bars(axis, bars, legend, xlabel, title):
    """Horizontal bars of MB/s with each row's share of the link, coloured by kind."""
    from matplotlib.patches import Patch
    y = range(len(bars))
    axis.barh(y, [r['mb_s'] for r in bars], color=[COLORS[r['kind']] for r in bars])
    axis.set_yticks(list(y))
    axis.set_yticklabels([r['method'] for r in bars])
    axis.invert_yaxis()
    for i, r in enumerate(bars):
        axis.text(r['mb_s'], i, ' %.0f (%.0f%%)' % (r['mb_s'], 100 * r['of_link']), va='center')
    axis.set_xlim(0, max(r['mb_s'] for r in bars) * 1.4)
    kinds = [k for k in COLORS if any(r['kind'] == k for r in bars)]
    axis.legend([Patch(color=COLORS[k]) for k in kinds], [legend[k] for k in kinds], loc='upper center',
                bbox_to_anchor=(0.5, -0.12), ncol=3, fontsize='small')
    axis.set_xlabel(xlabel)
    axis.set_title(title)


def draw(scaling, copy, local, out):
    import matplotlib
    matplotlib.use('Agg')  # no display on a CI machine
    import matplotlib.pyplot as plt

    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(20, 6.5), gridspec_kw={'width_ratios': [1, 1.3, 1.3]})
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

    legend = {'link': 'link (iperf3)', 'raw copy': 'plain TCP copy to disk', 'rsync': 'rsync daemon',
              'model_sync': 'model_sync role, pull task', 'cpu': 'hashing only, no copy'}
    copy_bars(middle, copy['rows'], legend,
              'MB/s of a %.1f GiB model in %d files (%% of the link)' % (copy['bytes'] / 1024 ** 3, copy['files']),
              'Model copy between two test hosts (2 shared cores)')
    bars = [dict(r, kind=next(k for prefix, k in LOCAL_KINDS if r['method'].startswith(prefix))) for r in local['rows']]
    legend = {'link': 'link (TCP to /dev/null)', 'raw copy': 'plain TCP copy to disk',
              'rsync': 'rsync daemon (transfer alone)', 'model_sync': "model_sync's pull (copy + verify)",
              'cpu': 'SHA-256 alone, no copy'}
    copy_bars(right, bars, legend,
              'MB/s of a %.0f GiB model in %d files (%% of the link)' % (local['bytes'] / 1024 ** 3, local['files']),
              "model_sync's helper, two ends of %d cores (copy-local)" % (local['cpus'] // 2))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m bench.plot', description=__doc__)
    parser.add_argument('--scaling', default=os.path.join(DOCS, 'controller-scaling.json'))
    parser.add_argument('--copy', default=os.path.join(DOCS, 'copy-throughput-overlap.json'))
    parser.add_argument('--local', default=os.path.join(DOCS, 'copy-local-16cpu-split.json'))
    parser.add_argument('--out', default=os.path.join(DOCS, 'issue7.png'))
    args = parser.parse_args(argv)
    with open(args.scaling) as handle:
        scaling = json.load(handle)
    with open(args.copy) as handle:
        copy = json.load(handle)
    with open(args.local) as handle:
        local = json.load(handle)
    print(draw(scaling, copy, local, args.out))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
