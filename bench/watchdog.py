# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving watchdog's detection time and time back to serving (rule O4) on the
simulated 2-Spark cluster (tests/sim/cluster.py), through ansible-runner:

  setup  the deploy (playbooks/deploy-m27.yml) when the cluster does not serve, then the launch step
         (playbooks/steps/10_launch.yml) with the watchdog on, sized as the e2e case sizes it: a probe every
         --interval s, a hang after --deadline s without a token, one failed probe enough, a
         budget of --repeat + 1 recoveries.
  hang   --repeat times: SIGSTOP of the worker's rank (its Ray engine process); detection is the
         time from the stall to the start of the watchdog's recovery, back is from the stall to
         the known answer checked on the relaunched engine (the watchdog's own state file).
  power  --repeat times (rule O5): both simulated Sparks killed at once (every process, no
         shutdown), then started again together; detection is from the power's return to the
         start of the recovery (the watchdog boots with the head and finds no engine), back is
         from the power's return to the known answer checked. Nothing comes from the controller.
  leak   --repeat times (rules H4, O4): the worker's Ray container dies under its rank (its init
         killed, as a crash or the OOM killer ends it); the simulated driver keeps the rank's
         unified memory until a reboot. Detection is from the kill to the start of the recovery;
         the leak step is from the engine's stop to the worker back in Ray (the exporters' reading,
         reboot-if-leaked through the cluster SSH gate, the node's boot); back is from the kill to
         the known answer checked.

--faults picks the parts (default all three, in that order).

By design detection is at most one interval plus the deadline (a probe that started just before the
stall waits its deadline); on a Spark the defaults are 60 s and 120 s, twice in a row
(watchdog_failures 2). This takes the simulated cluster: never run it while someone else
uses it. The watchdog is removed at the end (the simulation's inventory has it off)."""
import pytest
import json
import os
import subprocess
import sys
import time

from bench.hosts import TOP
from bench.runner import run_playbook

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O5")

PLAYBOOK, INVENTORY, PROFILE = 'playbooks/deploy-m27.yml', 'inventory/sim.ini', 'minimax-m27-nvfp4'
LAUNCH = os.path.join(TOP, 'playbooks', 'steps', '10_launch.yml')
STATE = '/var/lib/gb10/watchdog/state.json'  # watchdog_dir's default


def _on(host, *argv):
    return subprocess.run(['docker', 'exec', host] + list(argv), check=True, capture_output=True, text=True,
                          timeout=120).stdout


def _state(head):
    return json.loads(_on(head, 'cat', STATE))


def _serves(head):
    probe = subprocess.run(['docker', 'exec', head, 'curl', '-sf', '-m', '5', 'http://127.0.0.1:8000/health'],
                           capture_output=True, timeout=60, check=False)
    return probe.returncode == 0


def _recovery_after(head, since):
    """The watchdog's first recovery that started after since, once it ended serving (bounded)."""
    recovery = {}
    for _poll in range(300):  # bounded: 300 x 1 s
        try:
            recovery = _state(head).get('last_recovery') or {}
        except (subprocess.CalledProcessError, ValueError):  # the head is still booting
            recovery = {}
        if recovery.get('started', 0) > since and 'result' in recovery:
            break
        time.sleep(1)
    if recovery.get('result') != 'serving':
        raise RuntimeError('the watchdog did not bring the engine back: %s' % recovery)
    return recovery


FAULTS = ('hang', 'power', 'leak')


def _leak_step(recovery):
    """Seconds from the engine's stop to every node back in Ray: the leak readings, the reboot, the boot."""
    return round(recovery['nodes_back_s'] - recovery['stopped_s'], 1)


def run(repeat=3, interval=3, deadline=10, faults=FAULTS):
    sys.path.insert(0, os.path.join(TOP, 'tests', 'sim'))
    import cluster  # tests/sim/cluster.py: the simulation's own manager

    state = cluster.Cluster().up(2)
    head, worker = [h['name'] for h in state['hosts']]
    inventory = os.path.join(TOP, INVENTORY)
    if not _serves(head):
        run_playbook(os.path.join(TOP, PLAYBOOK), inventory)
    settings = {'gb10_profile': PROFILE, 'gb10_watchdog': True, 'watchdog_interval_s': interval,
                'watchdog_deadline_s': deadline, 'watchdog_failures': 1,
                'watchdog_max_restarts': len(faults) * repeat + 1,
                # The exporters read every 5 s (the e2e case's size): a reading after the stop comes soon.
                'node_metrics_interval_s': 5}
    result = {'cpus': os.cpu_count(), 'loadavg_before': os.getloadavg(), 'interval_s': interval,
              'deadline_s': deadline, 'hangs': [], 'power_cuts': [], 'leaks': []}
    _on(head, 'rm', '-f', STATE)  # a fresh budget for this run
    run_playbook(LAUNCH, inventory, extravars=settings)
    try:
        for _try in range(repeat if 'hang' in faults else 0):
            time.sleep(2 * interval)  # a probe or two on the healthy engine first
            _on(worker, 'docker', 'exec', 'gb10-ray-worker', 'pkill', '-STOP', '-f', '^ray::RayWorker')
            stalled = time.time()
            recovery = _recovery_after(head, stalled)
            result['hangs'].append({'detection_s': round(recovery['started'] - stalled, 1),
                                    'back_s': round(recovery['started'] + recovery['back_s'] - stalled, 1),
                                    'recovery_s': recovery['back_s'], 'stop': recovery['stopped']})
        for _try in range(repeat if 'power' in faults else 0):
            time.sleep(2 * interval)
            subprocess.run(['docker', 'kill', head, worker], check=True, capture_output=True, timeout=120)
            back_on = time.time()
            subprocess.run(['docker', 'start', head, worker], check=True, capture_output=True, timeout=120)
            recovery = _recovery_after(head, back_on)
            result['power_cuts'].append({'detection_s': round(recovery['started'] - back_on, 1),
                                         'back_s': round(recovery['started'] + recovery['back_s'] - back_on, 1),
                                         'recovery_s': recovery['back_s']})
        for _try in range(repeat if 'leak' in faults else 0):
            time.sleep(2 * interval)
            init = _on(worker, 'docker', 'inspect', '-f', '{{.State.Pid}}', 'gb10-ray-worker').strip()
            _on(worker, 'kill', '-KILL', init)
            killed = time.time()
            recovery = _recovery_after(head, killed)
            if set(recovery.get('rebooted', {})) != {worker}:
                raise RuntimeError('the watchdog did not reboot the leaked worker alone: %s' % recovery)
            result['leaks'].append({'detection_s': round(recovery['started'] - killed, 1),
                                    'back_s': round(recovery['started'] + recovery['back_s'] - killed, 1),
                                    'recovery_s': recovery['back_s'], 'leak_step_s': _leak_step(recovery),
                                    'unaccounted_gib': recovery['memory'][worker].get('unaccounted_gib')})
    finally:
        run_playbook(LAUNCH, inventory, extravars={'gb10_profile': PROFILE, 'gb10_watchdog': False})
        _on(head, 'rm', '-f', STATE)  # its recoveries would count against the next watchdog's budget
    result['loadavg_after'] = os.getloadavg()
    return result


def table(result):
    """Markdown tables of the parts that ran."""
    lines = ['Probe every %s s, deadline %s s, one failed probe enough.' % (result['interval_s'], result['deadline_s'])]
    if result['hangs']:
        lines += ['', '| try | stall -> recovery starts (s) | recovery: stop, relaunch, known answer (s) '
                  '| stall -> serving again (s) | engine stop |', '|---|---|---|---|---|']
    for number, hang in enumerate(result['hangs'], 1):
        figures = (number, hang['detection_s'], hang['recovery_s'], hang['back_s'], hang['stop'])
        lines.append('| %d | %.1f | %.1f | %.1f | %s |' % figures)
    if result['power_cuts']:
        lines += ['', '| power cut | power back -> recovery starts (s) | recovery: wait for nodes, relaunch, known '
                  'answer (s) | power back -> serving again (s) |', '|---|---|---|---|']
    for number, cut in enumerate(result['power_cuts'], 1):
        lines.append('| %d | %.1f | %.1f | %.1f |' % (number, cut['detection_s'], cut['recovery_s'], cut['back_s']))
    if result['leaks']:
        lines += ['', '| leak | kill -> recovery starts (s) | engine stopped -> worker rebooted and back in Ray (s) '
                  '| recovery in all (s) | kill -> serving again (s) | leaked (GiB) |', '|---|---|---|---|---|---|']
    for number, leak in enumerate(result['leaks'], 1):
        figures = (number, leak['detection_s'], leak['leak_step_s'], leak['recovery_s'], leak['back_s'],
                   leak['unaccounted_gib'])
        lines.append('| %d | %.1f | %.1f | %.1f | %.1f | %s |' % figures)
    return '\n'.join(lines)
