# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure parts of bench/: task timings from ansible-runner events, and the deploy-time rows
built from them (bench/deploy_time.py; the benchmark itself needs the simulated cluster)."""
import datetime
import os
import sys
import tempfile

import ansible_runner

from bench import deploy_time
from bench.events import task_results, task_runs, task_span

T0 = datetime.datetime(2026, 11, 23, 12, 0, 0, tzinfo=datetime.timezone.utc)


def event(kind, task, host, start_s=None, end_s=None, **res):
    data = {'task': task, 'host': host, 'role': 'vllm_serve', 'res': res}
    if start_s is not None:
        # ansible-runner writes the times as ISO 8601 strings in the job event files.
        data['start'] = (T0 + datetime.timedelta(seconds=start_s)).isoformat()
        data['end'] = (T0 + datetime.timedelta(seconds=end_s)).isoformat()
    return {'event': kind, 'event_data': data}


def deploy_events(launched, wait_s, pull_s=None):
    events = [
        {'event': 'playbook_on_start', 'event_data': {}},
        event('runner_on_start', deploy_time.LAUNCH_TASK, 'spark1'),
    ]
    if launched:
        events.append(event('runner_on_ok', deploy_time.LAUNCH_TASK, 'spark1', 10, 11, rc=0))
    else:
        events.append(event('runner_on_skipped', deploy_time.LAUNCH_TASK, 'spark1', 10, 10))
    events.append(event('runner_on_ok', deploy_time.ENGINE_TASK, 'spark1', 11, 11 + wait_s, rc=0,
                        stdout='ready'))
    events.append(event('runner_on_skipped', deploy_time.ENGINE_TASK, 'spark2', 11, 11))
    if pull_s is not None:
        events.append(event('runner_on_ok', deploy_time.MODEL_TASK, 'spark2', 2, 2 + pull_s,
                            stdout='{"seconds": 3, "repaired": 0}'))
    events.append({'event': 'playbook_on_stats', 'event_data': {'changed': {'spark1': 3}}})
    return events


def test_task_span_covers_every_host_that_ran_it():
    events = [event('runner_on_ok', 'copy', 'a', 0, 5), event('runner_on_ok', 'copy', 'b', 1, 7.5),
              event('runner_on_skipped', 'copy', 'c', 0, 60)]
    assert task_span(events, 'copy') == 7.5
    assert task_span(events, 'copy', statuses=('skipped',)) == 60
    assert task_span(events, 'absent') is None


def test_failed_tasks_count_and_events_without_times_are_left_out():
    events = [event('runner_on_start', 'wait', 'a'), event('runner_on_failed', 'wait', 'a', 3, 9, rc=1),
              {'event': 'playbook_on_stats', 'event_data': {}}]
    runs = task_runs(events)
    assert [(r['task'], r['status'], r['seconds']) for r in runs] == [('wait', 'failed', 6.0)]
    assert task_results(events, 'wait') == {'a': {'rc': 1}}


def test_cold_deploy_row():
    row = deploy_time.phase('cold', 100.0, {'changed': {'spark1': 20, 'spark2': 7}},
                            deploy_events(launched=True, wait_s=40, pull_s=12))
    assert row['engine_startup_s'] == 40
    assert row['overhead_vs_engine'] == 1.5  # (100 - 40) / 40
    assert row['model_copy_s'] == 12
    assert row['changed'] == 27
    assert row['slowest_tasks'][0] == (deploy_time.ENGINE_TASK, 40.0)


def test_noop_row_has_no_engine_startup_share():
    # The engine was kept: its one health probe is not a start-up, so no share is computed.
    row = deploy_time.phase('no-op', 20.0, {'changed': {}}, deploy_events(launched=False, wait_s=0.4))
    assert row['engine_launched'] is False
    assert row['overhead_vs_engine'] is None
    assert row['model_copy_s'] is None
    assert row['changed'] == 0
    table = deploy_time.table({'sizes': [{'nodes': 2, 'rows': [row]}]})
    assert '| 2 | no-op | 20.0 | 0 | 0.4 | - | - |' in table


def test_time_by_role_counts_each_task_once_for_its_role_and_the_rest_as_between_tasks():
    events = [event('runner_on_ok', 'copy', 'a', 0, 2), event('runner_on_ok', 'copy', 'b', 0, 3),
              event('runner_on_skipped', 'probe', 'a', 4, 4.5)]
    for item in events:
        item['event_data']['task_uuid'] = item['event_data']['task']
    events.append({'event': 'runner_on_ok', 'event_data': {
        'task': 'summary', 'task_uuid': 'summary', 'host': 'a', 'role': '', 'play': 'Report', 'res': {},
        'start': (T0 + datetime.timedelta(seconds=5)).isoformat(),
        'end': (T0 + datetime.timedelta(seconds=6)).isoformat()}})
    # copy: 3 s over both hosts, probe 0.5 s, both vllm_serve's; the play's own task 1 s; 1.5 s of
    # the 6 s between the first start and the last end ran no task.
    assert deploy_time.time_by_role(events) == {'vllm_serve': [3.5, 2], 'between tasks': [1.5, 0],
                                                'play: Report': [1.0, 1]}


def test_real_runner_events_time_a_retried_task():
    """The event format the parser expects is the one ansible-runner writes: a task that fails
    twice with a 1 s delay and then succeeds spans at least 2 s, from its first try."""
    with tempfile.TemporaryDirectory() as private:
        marker = os.path.join(private, 'tries')
        playbook = os.path.join(private, 'retry.yml')
        with open(playbook, 'w') as handle:
            handle.write('''- hosts: localhost
  gather_facts: false
  tasks:
    - name: Third try succeeds
      ansible.builtin.shell: echo x >> {0}; test "$(wc -l < {0})" -ge 3
      register: tries
      until: tries.rc == 0
      retries: 5
      delay: 1
      changed_when: false
    - name: Never runs
      ansible.builtin.command: /bin/false
      when: false
'''.format(marker))
        runner = ansible_runner.run(private_data_dir=private, playbook=playbook,
                                    inventory='localhost ansible_connection=local '
                                              'ansible_python_interpreter=%s' % sys.executable,
                                    quiet=True)
        assert runner.status == 'successful'
        events = list(runner.events)
    span = task_span(events, 'Third try succeeds')
    assert span is not None and span >= 2.0
    assert task_span(events, 'Never runs') is None
    assert task_span(events, 'Never runs', statuses=('skipped',)) is not None
