# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller scaling: first run and no-op re-run of bench/playbooks/host_config.yml against
2, 4, 8 and 16 light hosts. Reports wall time per size and its growth relative to 2 hosts, for
the re-run as a user gets it (every host read against its stamp, the roles skipped)
and with every role run (-e gb10_converge=full, what a no-op cost before the converged check).

Each no-op re-run also reports the CPU seconds it took on each side: the controller's
(ansible-playbook and what it started, as this process's and its children's rusage) and the light
hosts' (their containers' cgroup CPU accounting). Here both share this machine's cores, as no real
cluster does: what bounds the growth with the host count is read from these two figures."""
import configparser
import os
import resource

import docker

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


def _hosts_cpu_s(ids):
    """CPU seconds the containers `ids` used so far (cgroup v1 cpuacct or v2 cpu.stat); None where
    this machine has neither layout."""
    total = 0.0
    for cid in ids:
        try:
            with open('/sys/fs/cgroup/cpuacct/docker/%s/cpuacct.usage' % cid) as handle:
                total += int(handle.read()) / 1e9
                continue
        except OSError:
            pass
        try:
            with open('/sys/fs/cgroup/system.slice/docker-%s.scope/cpu.stat' % cid) as handle:
                total += int(dict(line.split() for line in handle)['usage_usec']) / 1e6
        except (OSError, KeyError, ValueError):
            return None
    return total


def _controller_cpu_s():
    usages = (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    return sum(r.ru_utime + r.ru_stime for r in usages)


def _measured(ids, *args, **kwargs):
    """run_playbook's (wall, stats) and the CPU seconds it took on the controller and the hosts."""
    hosts0, ctl0 = _hosts_cpu_s(ids), _controller_cpu_s()
    wall, stats, unused_events = run_playbook(*args, **kwargs)
    hosts1, ctl1 = _hosts_cpu_s(ids), _controller_cpu_s()
    return wall, stats, round(ctl1 - ctl0, 2), (None if hosts0 is None or hosts1 is None else round(hosts1 - hosts0, 2))


def run(sizes=(2, 4, 8, 16), repeat=1):
    """The no-op re-run is tried `repeat` times per size and the fastest counts: other jobs share
    the machine and only slow a run down. Every try is kept in the JSON; every try's changed
    count is reported (the largest), so a re-run that changed something cannot hide."""
    rows = []
    load_before = os.getloadavg()
    for size in sizes:
        # NET_ADMIN: the firewall role loads an iptables chain on each host.
        with light_hosts(size, cap_add=('NET_ADMIN', 'NET_RAW')) as (inventory, hosts):
            client = docker.from_env()
            ids = [client.containers.get(name).id for name, unused_ip in hosts]
            first, first_stats, unused_events = run_playbook(PLAYBOOK, inventory)
            noops = [_measured(ids, PLAYBOOK, inventory) for unused_try in range(repeat)]
            fulls = [_measured(ids, PLAYBOOK, inventory, extravars={'gb10_converge': 'full'})
                     for unused_try in range(repeat)]
        best = min(noops, key=lambda try_: try_[0])
        rows.append({'hosts': size, 'first_run_s': round(first, 2),
                     'noop_rerun_s': round(best[0], 2),
                     'noop_tries_s': [round(try_[0], 2) for try_ in noops],
                     'noop_controller_cpu_s': best[2], 'noop_hosts_cpu_s': best[3],
                     'full_rerun_s': round(min(try_[0] for try_ in fulls), 2),
                     'full_tries_s': [round(try_[0], 2) for try_ in fulls],
                     'first_changed': changed_total(first_stats),
                     'noop_changed': max(changed_total(try_[1]) for try_ in noops + fulls)})
    base, full_base = rows[0]['noop_rerun_s'], rows[0]['full_rerun_s']
    for row in rows:
        row['noop_vs_smallest'] = round(row['noop_rerun_s'] / base, 2)
        row['full_vs_smallest'] = round(row['full_rerun_s'] / full_base, 2)
        row['noop_s_per_host'] = round(row['noop_rerun_s'] / row['hosts'], 3)
    return {'settings': settings(), 'repeat': repeat, 'cpus': os.cpu_count(),
            'loadavg_before': load_before, 'loadavg_after': os.getloadavg(), 'rows': rows}


def table(result):
    lines = ['| hosts | first run (s) | no-op re-run (s) | re-run vs 2 hosts | its CPU: controller / hosts (s) '
             '| every role again (s) | vs 2 hosts | changed on re-runs |', '|---|---|---|---|---|---|---|---|']
    for r in result['rows']:
        hosts_cpu = r.get('noop_hosts_cpu_s')
        lines.append('| %d | %.1f | %.1f | %.2fx | %.1f / %s | %.1f | %.2fx | %d |' % (
            r['hosts'], r['first_run_s'], r['noop_rerun_s'], r['noop_vs_smallest'],
            r.get('noop_controller_cpu_s', 0), '-' if hosts_cpu is None else '%.1f' % hosts_cpu,
            r['full_rerun_s'], r['full_vs_smallest'], r['noop_changed']))
    return '\n'.join(lines)
