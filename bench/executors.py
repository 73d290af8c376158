# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The same profile under both executors, side by side in one run: Ray (rules R1-R5)
and vLLM's own multi-node executor (mp, X1-X3), on the simulated 2-Spark cluster
(tests/sim/cluster.py), through ansible-runner. For each executor, in turn:

  launch       playbooks/steps/10_launch.yml with gb10_executor=<executor> on the serving cluster: the
               switch takes the clean path (the other executor's engine stopped first); wall time
               of the launch and the engine's own start-up (the task "Wait for /health").
  idle, no engine   the engine stopped (every rank, SIGTERM first): what the serving containers
               hold and burn without it, over --idle-s seconds: Ray's processes and object store,
               or the mp executor's `sleep`. Memory is each container's cgroup usage as Docker
               reports it, summed per node; CPU is the containers' cgroup CPU time over the window.
  served       the launch again (a relaunch of the stopped engine): memory per node with the
               engine up, decode tok/s through the API gateway at 1 and 4 concurrent requests
               (--tokens tokens each, greedy, ignore_eos), CPU of the idle serving cluster.

The cluster serves the profile's executor again at the end. This takes the simulated cluster:
never run it while someone else uses it."""
import concurrent.futures
import json
import os
import subprocess
import sys
import time

from bench.events import task_span
from bench.hosts import TOP
from bench.runner import run_playbook

PLAYBOOK, INVENTORY, PROFILE = 'playbooks/deploy-m27.yml', 'inventory/sim.ini', 'minimax-m27-nvfp4'
LAUNCH = os.path.join(TOP, 'playbooks', 'steps', '10_launch.yml')
ENGINE_TASK = 'Wait for /health, showing progress (V7)'
CONTAINERS = {'ray': ('gb10-ray-head', 'gb10-ray-worker'), 'mp': ('gb10-vllm-head', 'gb10-vllm-worker')}
CONTROL = os.path.join(TOP, 'roles', 'vllm_serve', 'files', 'engine_control.sh')
STATE = '/var/lib/gb10-engine'  # vllm_serve_state_dir


def _on(host, *argv):
    return subprocess.run(['docker', 'exec', host] + list(argv), check=True, capture_output=True, text=True,
                          timeout=300).stdout


def container_stats(host, name):
    """(memory bytes, CPU nanoseconds) of a container from the node's Docker API."""
    raw = _on(host, 'curl', '-sf', '--unix-socket', '/var/run/docker.sock',
              'http://localhost/containers/%s/stats?stream=false' % name)
    stats = json.loads(raw)
    memory = stats['memory_stats'].get('usage', 0) - stats['memory_stats'].get('stats', {}).get('cache', 0)
    return memory, stats['cpu_stats']['cpu_usage']['total_usage']


def cluster_figures(hosts, executor, idle_s):
    """{host: GiB used by its serving container} and the cluster's CPU cores busy over idle_s."""
    names = dict(zip(hosts, (CONTAINERS[executor][0],) + (CONTAINERS[executor][1],) * (len(hosts) - 1)))
    before = {h: container_stats(h, names[h]) for h in hosts}
    time.sleep(idle_s)
    after = {h: container_stats(h, names[h]) for h in hosts}
    cpu_s = sum(after[h][1] - before[h][1] for h in hosts) / 1e9
    return {h: round(after[h][0] / 2 ** 30, 3) for h in hosts}, round(cpu_s / idle_s, 3)


def stop_engine(hosts, executor):
    """Every rank, rank 0 first, with the role's own control script (SIGTERM, bounded wait)."""
    with open(CONTROL) as handle:
        control = handle.read()
    ranks = hosts if executor == 'mp' else hosts[:1]
    for host, name in zip(ranks, (CONTAINERS[executor][0],) + (CONTAINERS[executor][1],) * (len(ranks) - 1)):
        _on(host, 'docker', 'exec', name, 'sh', '-c', control, 'engine-control', 'stop', STATE, '120')


def decode_rate(client, model, concurrency, tokens):
    """Generated tokens per second over `concurrency` requests at once, each `tokens` long."""
    def one(unused_index):
        reply = client.completions.create(model=model, prompt='The cluster', max_tokens=tokens, temperature=0,
                                          extra_body={'ignore_eos': True})
        return reply.usage.completion_tokens

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        total = sum(pool.map(one, range(concurrency)))
    return round(total / (time.perf_counter() - start), 2)


def api(cluster):
    sys.path.insert(0, os.path.join(TOP, 'tests'))
    from e2e.helpers import api_client  # the client as the e2e cases and a user make it
    return api_client(cluster, timeout=600)


def run(idle_s=30, tokens=64, executors=('ray', 'mp')):
    sys.path.insert(0, os.path.join(TOP, 'tests', 'sim'))
    import cluster as sim  # tests/sim/cluster.py: the simulation's own manager

    manager = sim.Cluster()
    state = manager.up(2)
    hosts = [h['name'] for h in state['hosts']]
    inventory = os.path.join(TOP, INVENTORY)
    run_playbook(os.path.join(TOP, PLAYBOOK), inventory)  # serving, whatever ran before
    client = api(_SimView(state))
    model = client.models.list().data[0].id
    result = {'cpus': os.cpu_count(), 'idle_s': idle_s, 'tokens': tokens, 'rows': []}
    for executor in executors:
        chosen = {'gb10_profile': PROFILE, 'gb10_executor': executor}
        wall, unused_stats, events = run_playbook(LAUNCH, inventory, extravars=chosen)
        startup = task_span(events, ENGINE_TASK)
        stop_engine(hosts, executor)
        idle_memory, idle_cpu = cluster_figures(hosts, executor, idle_s)
        relaunch, unused_stats, events = run_playbook(LAUNCH, inventory, extravars=chosen)
        served_memory, served_cpu = cluster_figures(hosts, executor, idle_s)
        result['rows'].append({
            'executor': executor, 'launch_s': round(wall, 1), 'engine_startup_s': startup,
            'relaunch_s': round(relaunch, 1), 'relaunch_engine_startup_s': task_span(events, ENGINE_TASK),
            'idle_memory_gib': idle_memory, 'idle_cpu_cores': idle_cpu,
            'served_memory_gib': served_memory, 'served_idle_cpu_cores': served_cpu,
            'decode_tok_s_1': decode_rate(client, model, 1, tokens),
            'decode_tok_s_4': decode_rate(client, model, 4, tokens)})
    # Back to the profile's own executor.
    run_playbook(LAUNCH, inventory, extravars={'gb10_profile': PROFILE})
    return result


class _SimView:
    """What api_client reads of a cluster: its head and the addresses (tests/e2e/conftest.py's SimCluster)."""

    def __init__(self, state):
        self.hosts = [h['name'] for h in state['hosts']]
        self.head = self.hosts[0]
        self.ips = {h['name']: h['ip'] for h in state['hosts']}


def _gib(values):
    return ', '.join('%.2f' % v for v in values.values())


def table(result):
    lines = ['| executor | launch (s) | engine start-up (s) | relaunch (s) | serving containers without the engine, GiB '
             'per node | idle CPU without the engine (cores) | with the engine, GiB per node | idle CPU serving '
             '(cores) | decode tok/s, 1 request | decode tok/s, 4 at once |',
             '|---|---|---|---|---|---|---|---|---|---|']
    for r in result['rows']:
        lines.append('| %s | %.1f | %.1f | %.1f | %s | %.3f | %s | %.3f | %.1f | %.1f |' % (
            r['executor'], r['launch_s'], r['engine_startup_s'] or 0, r['relaunch_s'], _gib(r['idle_memory_gib']),
            r['idle_cpu_cores'], _gib(r['served_memory_gib']), r['served_idle_cpu_cores'], r['decode_tok_s_1'],
            r['decode_tok_s_4']))
    return '\n'.join(lines)
