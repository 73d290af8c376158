# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deploy wall time on the simulated cluster (tests/sim/cluster.py), through ansible-runner:

  cold   `scripts/sim.sh up N --fresh`: host containers made anew with the cluster link port
         without an address, their engines emptied of every container, the model and the serving
         image only on the head (cluster_link, model_sync and serving_image do the rest). The
         image copy's MB/s is set against the plain TCP figure the link check measured between
         the same cluster addresses in the same run.
  no-op  the same deploy again at once; changed must be 0. The cluster is as the cold run left
         it, so the run skips every step up to the kept engine's smoke test (playbooks/
         01_converged.yml).
  no-op, every step   the same with -e gb10_converge=full: every role's tasks meet the serving
         cluster again (what a no-op cost before the converged check, and what any re-run costs where one
         node differs from its stamp).
  drift  playbooks/drift.yml --check --diff on that cluster, nothing drifted (the converged check's goal:
         30 s or less on 2 nodes); it must pass.
  warm   playbooks/teardown.yml (removes the engine and the Ray containers, drops the page cache;
         keeps the image, the model on every node and model_sync's verified marks), then deploy:
         a relaunch in new containers, with the compile caches that serving_containers keeps on every node
         (serving_containers_cache_dir) as the run before left them.
  warm, caches emptied   the same teardown, then every node's serving_containers_cache_dir emptied, then
         deploy: what the kept caches are worth (V7 reports ~25 min cold, ~4 min warm
         on a Spark).

N=2 runs playbooks/deploy-m27.yml on inventory/sim.ini, N=3 deploy-m3.yml on sim3.ini. The
engine's own start-up is the time of the task "Wait for /health, showing progress (V7)" in
roles/vllm_serve/tasks/engine.yml, read from the run's events; the rest of a deploy is what the
collection adds around it: (deploy - engine start-up) / engine start-up.

This takes the simulated cluster (recreates its hosts): never run it while someone else uses it."""
import os
import subprocess
import sys

import yaml

from bench.events import task_results, task_runs, task_span
from bench.hosts import OUT, TOP
from bench.runner import changed_total, run_playbook

ENGINE_TASK = 'Wait for /health, showing progress (V7)'
LAUNCH_TASK = "Start this node's rank inside its serving container (R1 with Ray, docker exec, never ray://)"
MODEL_TASK = 'Pull, verify every checksum, re-fetch mismatches, mark verified'
IMAGE_TASK = 'What this node got, for the summary and the callers'  # roles/serving_image
LINK_TASK = "Keep this node's result"  # roles/link_check, tasks/probe.yml
SMOKE_TASK = 'Send a chat request with a tool definition and max_tokens >= 512'  # roles/vllm_serve, V8
TEARDOWN = os.path.join(TOP, 'playbooks', 'teardown.yml')
DRIFT = os.path.join(TOP, 'playbooks', 'drift.yml')
TARGETS = {
    2: ('playbooks/deploy-m27.yml', 'inventory/sim.ini', 'minimax-m27-nvfp4'),
    3: ('playbooks/deploy-m3.yml', 'inventory/sim3.ini', 'minimax-m3-nvfp4'),
}


def slowest_tasks(events, count=5):
    """The `count` longest tasks of a run as (task, seconds): a task's wall time over all hosts.
    A task file included in two plays (vllm_serve's probe.yml) is two tasks: each is timed on its
    own (by task uuid), not from the first play's start to the second's end."""
    spans = {}
    for run in task_runs(events):
        key = run['task_uuid'] or (run['play'], run['task'])
        name, first, last = spans.get(key, (run['task'], run['start'], run['end']))
        spans[key] = (name, min(first, run['start']), max(last, run['end']))
    timed = sorted(((name, (end - start).total_seconds()) for name, start, end in spans.values()),
                   key=lambda item: -item[1])
    return [(name, round(seconds, 1)) for name, seconds in timed[:count]]


def time_by_role(events):
    """Where a run's time goes: {role: [seconds, tasks]}, each task's wall time over all
    hosts (by task uuid) counted for its role, or for its play when it belongs to no role; under
    'between tasks' the rest of the run's wall time (Ansible's own work between tasks: includes,
    the strategy, the connections), from the first task's start to the last task's end."""
    spans = {}
    for run in task_runs(events):
        key = run['task_uuid'] or (run['play'], run['task'])
        owner = run['role'] or 'play: %s' % run['play']
        _owner, first, last = spans.get(key, (owner, run['start'], run['end']))
        spans[key] = (owner, min(first, run['start']), max(last, run['end']))
    roles = {}
    for owner, start, end in spans.values():
        seconds, tasks = roles.get(owner, (0.0, 0))
        roles[owner] = (seconds + (end - start).total_seconds(), tasks + 1)
    if spans:
        wall = (max(end for _o, _s, end in spans.values()) - min(start for _o, start, _e in spans.values())).total_seconds()
        roles['between tasks'] = (wall - sum(seconds for seconds, _tasks in roles.values()), 0)
    return {owner: [round(seconds, 1), tasks] for owner, (seconds, tasks) in
            sorted(roles.items(), key=lambda item: -item[1][0])}


def phase(name, wall, stats, events):
    """One row: wall time, changed count, the engine's start-up (None when the engine was kept and
    no wait ran) and the share of the deploy that is not the engine's start-up."""
    engine = task_span(events, ENGINE_TASK)
    launch = task_span(events, LAUNCH_TASK)
    model = task_span(events, MODEL_TASK)
    smoke = task_span(events, SMOKE_TASK)
    row = {'phase': name, 'wall_s': round(wall, 2), 'changed': changed_total(stats),
           'engine_startup_s': None if engine is None else round(engine, 2),
           # The first request after a launch also pays what is built at first use (kernels).
           'first_answer_s': None if smoke is None else round(smoke, 2),
           'engine_launched': launch is not None,
           'model_copy_s': None if model is None else round(model, 2),
           'overhead_vs_engine': None, 'slowest_tasks': slowest_tasks(events),
           'time_by_role': time_by_role(events)}
    # Only a run that launched the engine waited for its start-up; a no-op run's one health probe
    # is not a start-up.
    if engine and launch is not None:
        row['overhead_vs_engine'] = round((wall - engine) / engine, 2)
    row['image_copies'] = [res['ansible_facts']['serving_image_result'] for res in task_results(events, IMAGE_TASK).values()
                           if res.get('ansible_facts', {}).get('serving_image_result', {}).get('action') == 'copied']
    tcp = [res['ansible_facts']['link_check_result']['tcp_gbit'] for res in task_results(events, LINK_TASK).values()
           if res.get('ansible_facts', {}).get('link_check_result', {}).get('tcp_gbit')]
    # The slowest sender's plain TCP between the cluster addresses, as the deploy's summary says.
    row['link_tcp_gbit'] = min(float(t) for t in tcp) if tcp else None
    return row


def image_copy(row):
    """'<seconds> s, <MB/s> (link <MB/s>)' of a run's image copies (the slowest node), or '-'."""
    copies = row.get('image_copies') or []
    if not copies:
        return '-'
    slowest = min(copies, key=lambda c: float(c['mb_per_s']))
    link = '' if row.get('link_tcp_gbit') is None else ' (link TCP %.0f MB/s)' % (row['link_tcp_gbit'] * 1000 / 8)
    return '%.1f s, %.1f MB/s%s' % (float(slowest['seconds']), float(slowest['mb_per_s']), link)


def cache_dir():
    """serving_containers_cache_dir as the role defines it (the simulation does not override it)."""
    with open(os.path.join(TOP, 'roles', 'serving_containers', 'defaults', 'main.yml')) as handle:
        return yaml.safe_load(handle)['serving_containers_cache_dir']


def empty_caches(hosts):
    folder = cache_dir()
    for host in hosts:
        subprocess.run(['docker', 'exec', host, 'sh', '-c', 'rm -rf "$1"/*', 'sh', folder],
                       check=True, timeout=120)


def run(nodes=(2, 3)):
    sys.path.insert(0, os.path.join(TOP, 'tests', 'sim'))
    import cluster  # tests/sim/cluster.py: the simulation's own manager, not a copy of it

    result = {'cpus': os.cpu_count(), 'loadavg_before': os.getloadavg(), 'sizes': []}
    manager = cluster.Cluster()
    for count in nodes:
        playbook, inventory = (os.path.join(TOP, p) for p in TARGETS[count][:2])
        profile = TARGETS[count][2]
        facts = os.path.join(OUT, 'deploy-facts-%d' % count)  # one fact cache per size, as a user has
        state = manager.up(count, fresh=True)
        rows = [phase('cold', *run_playbook(playbook, inventory, fact_cache=facts))]
        rows.append(phase('no-op', *run_playbook(playbook, inventory, fact_cache=facts)))
        rows.append(phase('no-op, every step', *run_playbook(playbook, inventory, fact_cache=facts,
                                                             extravars={'gb10_converge': 'full'})))
        rows.append(phase('drift', *run_playbook(DRIFT, inventory, extravars={'gb10_profile': profile},
                                                 fact_cache=facts, check=True)))
        teardown, unused_stats, unused_events = run_playbook(TEARDOWN, inventory, fact_cache=facts)
        rows.append(phase('warm', *run_playbook(playbook, inventory, fact_cache=facts)))
        run_playbook(TEARDOWN, inventory, fact_cache=facts)
        empty_caches([host['name'] for host in state['hosts']])
        rows.append(phase('warm, caches emptied', *run_playbook(playbook, inventory, fact_cache=facts)))
        result['sizes'].append({'nodes': count, 'playbook': os.path.relpath(playbook, TOP),
                                'inventory': os.path.relpath(inventory, TOP),
                                'teardown_s': round(teardown, 2), 'rows': rows})
    result['loadavg_after'] = os.getloadavg()
    return result


def _num(value, fmt):
    return '-' if value is None else fmt % value


def table(result):
    lines = ['| nodes | run | wall (s) | changed | engine start-up (s) | first answer (s) | (deploy - engine) / engine '
             '| model copy (s) | image copy, slowest node | slowest task |', '|---|---|---|---|---|---|---|---|---|---|']
    for size in result['sizes']:
        for r in size['rows']:
            slow = r['slowest_tasks'][0] if r['slowest_tasks'] else ('-', 0)
            lines.append('| %d | %s | %.1f | %d | %s | %s | %s | %s | %s | %s (%.1f s) |' % (
                size['nodes'], r['phase'], r['wall_s'], r['changed'],
                _num(r['engine_startup_s'], '%.1f'), _num(r.get('first_answer_s'), '%.1f'),
                _num(r['overhead_vs_engine'], '%.2f'),
                _num(r['model_copy_s'], '%.1f'), image_copy(r), slow[0], slow[1]))
    for size in result['sizes']:
        for r in size['rows']:
            if r['phase'] in ('no-op', 'no-op, every step', 'drift'):
                lines += ['', 'Where the %d-node %s run\'s time goes (seconds, tasks):' % (size['nodes'], r['phase']),
                          '', '| role or play | s | tasks |', '|---|---|---|']
                lines += ['| %s | %.1f | %d |' % (owner, seconds, tasks)
                          for owner, (seconds, tasks) in r['time_by_role'].items()]
    return '\n'.join(lines)
