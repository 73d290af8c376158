# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller scaling: first run and no-op re-run of bench/playbooks/host_config.yml against
2, 4, 8 and 16 light hosts. Reports wall time per size and its growth relative to 2 hosts, for
the re-run as a user gets it (every host read against its stamp, the roles skipped: issue 29)
and with every role run (-e gb10_converge=full, the no-op before issue 29)."""
import configparser
import os

from bench.hosts import TOP, light_hosts
from bench.runner import changed_total, run_playbook

PLAYBOOK = os.path.join(TOP, 'bench', 'playbooks', 'host_config.yml')


def settings():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(TOP, 'ansible.cfg'))
    return {
        'forks': cfg.get('defaults', 'forks'),
        'pipelining': cfg.get('ssh_connection', 'pipelining'),
        'ssh_args': cfg.get('ssh_connection', 'ssh_args'),
        'gathering': cfg.get('defaults', 'gathering'),
        'fact_caching': cfg.get('defaults', 'fact_caching'),
    }


def run(sizes=(2, 4, 8, 16), repeat=1):
    """The no-op re-run is tried `repeat` times per size and the fastest counts: other jobs share
    the machine and only slow a run down. Every try is kept in the JSON; every try's changed
    count is reported (the largest), so a re-run that changed something cannot hide."""
    rows = []
    load_before = os.getloadavg()
    for size in sizes:
        # NET_ADMIN: the firewall role loads an iptables chain on each host.
        with light_hosts(size, cap_add=('NET_ADMIN', 'NET_RAW')) as (inventory, unused_hosts):
            first, first_stats, unused_events = run_playbook(PLAYBOOK, inventory)
            noops = [run_playbook(PLAYBOOK, inventory)[:2] for unused_try in range(repeat)]
            fulls = [run_playbook(PLAYBOOK, inventory, extravars={'gb10_converge': 'full'})[:2]
                     for unused_try in range(repeat)]
        rows.append({'hosts': size, 'first_run_s': round(first, 2),
                     'noop_rerun_s': round(min(wall for wall, unused in noops), 2),
                     'noop_tries_s': [round(wall, 2) for wall, unused in noops],
                     'full_rerun_s': round(min(wall for wall, unused in fulls), 2),
                     'full_tries_s': [round(wall, 2) for wall, unused in fulls],
                     'first_changed': changed_total(first_stats),
                     'noop_changed': max(changed_total(stats) for unused, stats in noops + fulls)})
    base, full_base = rows[0]['noop_rerun_s'], rows[0]['full_rerun_s']
    for row in rows:
        row['noop_vs_smallest'] = round(row['noop_rerun_s'] / base, 2)
        row['full_vs_smallest'] = round(row['full_rerun_s'] / full_base, 2)
        row['noop_s_per_host'] = round(row['noop_rerun_s'] / row['hosts'], 3)
    return {'settings': settings(), 'repeat': repeat, 'cpus': os.cpu_count(),
            'loadavg_before': load_before, 'loadavg_after': os.getloadavg(), 'rows': rows}


def table(result):
    lines = ['| hosts | first run (s) | no-op re-run (s) | re-run vs 2 hosts | every role again (s) | vs 2 hosts '
             '| changed on re-runs |', '|---|---|---|---|---|---|---|']
    for r in result['rows']:
        lines.append('| %d | %.1f | %.1f | %.2fx | %.1f | %.2fx | %d |' % (
            r['hosts'], r['first_run_s'], r['noop_rerun_s'], r['noop_vs_smallest'],
            r['full_rerun_s'], r['full_vs_smallest'], r['noop_changed']))
    return '\n'.join(lines)
