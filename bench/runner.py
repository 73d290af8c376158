# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a playbook through ansible-runner and time it; results come from its stats and events."""
import os
import shutil
import tempfile
import time

import ansible_runner

from bench.hosts import OUT, TOP


def run_playbook(playbook, inventory, extravars=None, fact_cache=None, check=False):
    """(wall seconds, stats dict, events list; bench.events reads task timings from the events).
    Uses the project's ansible.cfg (forks, pipelining, ControlPersist, fact caching) so the
    numbers are what users get. check: --check --diff, as drift.yml runs."""
    os.makedirs(OUT, exist_ok=True)  # deploy-time makes no light hosts, whose set-up would make it
    private = tempfile.mkdtemp(prefix='run-', dir=OUT)
    env = {
        'ANSIBLE_CONFIG': os.path.join(TOP, 'ansible.cfg'),
        'ANSIBLE_COLLECTIONS_PATH': os.path.join(TOP, '.collections'),
        'ANSIBLE_CACHE_PLUGIN_CONNECTION': fact_cache or os.path.join(private, 'facts'),
        'ANSIBLE_SSH_CONTROL_PATH_DIR': os.path.join(private, 'cp'),
    }
    start = time.perf_counter()
    runner = ansible_runner.run(
        private_data_dir=private, project_dir=TOP, playbook=os.path.abspath(playbook),
        inventory=os.path.abspath(inventory), extravars=extravars or {}, envvars=env,
        cmdline='--check --diff' if check else None, quiet=True)
    wall = time.perf_counter() - start
    if runner.status != 'successful':
        raise RuntimeError('%s on %s: %s (rc %s); events in %s'
                           % (playbook, inventory, runner.status, runner.rc, private))
    stats = runner.stats or {}
    events = list(runner.events)  # read before the artifacts that hold them are removed
    shutil.rmtree(os.path.join(private, 'artifacts'), ignore_errors=True)
    return wall, stats, events


def changed_total(stats):
    return sum((stats.get('changed') or {}).values())
