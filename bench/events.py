# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Task timings from ansible-runner events (not from scraped stdout): each runner_on_ok/failed/
skipped/unreachable event carries the host's start and end time of that task (ISO 8601, UTC);
for a task with until/retries the start is the first try, the end the last."""
import datetime

FINISHED = {
    'runner_on_ok': 'ok',
    'runner_on_failed': 'failed',
    'runner_on_skipped': 'skipped',
    'runner_on_unreachable': 'unreachable',
}


def _when(value):
    return datetime.datetime.fromisoformat(value) if isinstance(value, str) else value


def task_runs(events):
    """One dict per task finished on a host, in event order: task, role, play, task_uuid, host,
    status, start, end (datetimes) and seconds. Events without timing data are left out."""
    runs = []
    for event in events:
        status = FINISHED.get(event.get('event'))
        data = event.get('event_data') or {}
        if status is None or not data.get('start') or not data.get('end'):
            continue
        start, end = _when(data['start']), _when(data['end'])
        runs.append({'task': data.get('task', ''), 'role': data.get('role', ''),
                     'play': data.get('play', ''), 'task_uuid': data.get('task_uuid', ''),
                     'host': data.get('host', ''), 'status': status, 'start': start,
                     'end': end, 'seconds': (end - start).total_seconds(),
                     'res': data.get('res') or {}})
    return runs


def task_span(events, task, statuses=('ok', 'failed')):
    """Wall seconds of the task named `task` (its first start to its last end over all hosts that
    ran it with one of `statuses`; a skipped host did not wait), or None if no host ran it."""
    runs = [r for r in task_runs(events) if r['task'] == task and r['status'] in statuses]
    if not runs:
        return None
    return (max(r['end'] for r in runs) - min(r['start'] for r in runs)).total_seconds()


def task_results(events, task, statuses=('ok', 'failed')):
    """The `res` dicts of the task named `task` per host, for the hosts that ran it."""
    return {r['host']: r['res'] for r in task_runs(events)
            if r['task'] == task and r['status'] in statuses}
