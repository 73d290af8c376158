# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""lookup('gb10.serving.controller_dir'): one folder, set by one variable, for what the collection
keeps on the controller between runs (keys, CA, reports, logs), as a playbook calls it; and the
ansible-navigator example that keeps that folder between jobs, checked against navigator's own
settings schema."""
import glob
import json
import os
import re
import shlex

import jsonschema
import pytest
import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
LOGS_DIR = "{{ lookup('gb10.serving.logs_dir') }}"


@pytest.fixture
def run_lookup(lookup_msg):
    return lambda env_overrides, expr=LOGS_DIR, extra=(): lookup_msg(env_overrides, expr, extra)


def test_the_users_configuration_folder_by_default(tmp_path, run_lookup):
    rc, out = run_lookup({'HOME': str(tmp_path)}, "{{ lookup('gb10.serving.controller_dir') }}")
    assert rc == 0 and 'msg: %s/.config/gb10-serving\n' % tmp_path in out, out


def test_one_variable_moves_keys_ca_reports_and_logs(tmp_path, run_lookup):
    extra = ['-e', 'gb10_state_base=%s' % tmp_path, '-e', 'gb10_controller_dir={{ gb10_state_base }}/state']
    expr = ("{{ [lookup('gb10.serving.controller_dir', 'spark1.api-key'), lookup('gb10.serving.controller_dir', 'reports'),"
            " lookup('gb10.serving.logs_dir')] | join(' ') }}")
    rc, out = run_lookup({'HOME': str(tmp_path / 'home')}, expr, extra)
    assert rc == 0, out
    assert 'msg: {0}/state/spark1.api-key {0}/state/reports {0}/state/logs'.format(tmp_path) in ' '.join(out.split()), out


def test_gb10_logs_dir_still_wins_over_the_state_folder(tmp_path, run_lookup):
    rc, out = run_lookup({'HOME': str(tmp_path)}, extra=['-e', 'gb10_controller_dir=%s/state' % tmp_path,
                                                         '-e', 'gb10_logs_dir=%s/mine' % tmp_path])
    assert rc == 0 and 'msg: %s/mine\n' % tmp_path in out, out


def test_a_part_that_leaves_the_folder_is_refused(tmp_path, run_lookup):
    rc, out = run_lookup({'HOME': str(tmp_path)}, "{{ lookup('gb10.serving.controller_dir', '../elsewhere') }}")
    assert rc != 0 and 'takes parts below the folder' in out, out


def test_no_role_or_playbook_spells_the_folder_itself():
    # The lookup is its one definition: a default that spells the path would stay behind when a
    # user sets gb10_controller_dir, and a navigator job would lose that file.
    spelled = []
    for path in glob.glob(os.path.join(TOP, 'roles', '*', '*', '*.yml')) + glob.glob(os.path.join(TOP, 'playbooks', '**', '*.yml'), recursive=True):
        with open(path) as handle:
            code = '\n'.join(line for line in handle if not line.lstrip().startswith('#'))
            if re.search(r"\.config/gb10-serving|'HOME'\) }}/\.", code):
                spelled.append(os.path.relpath(path, TOP))
    assert spelled == []


def test_the_navigator_example_keeps_the_folder_and_the_host_keys_between_jobs():
    with open(os.path.join(TOP, 'docs', 'ansible-navigator.example.yml')) as handle:
        settings = yaml.safe_load(handle)
    # Version 26.10.0's own schema (ansible_navigator/data/ansible-navigator.json in its wheel).
    with open(os.path.join(TOP, 'tests', 'fixtures', 'ansible-navigator', 'ansible-navigator-26.10.0.schema.json')) as handle:
        jsonschema.validate(settings, json.load(handle))
    ee = settings['ansible-navigator']['execution-environment']
    (mount,) = ee['volume-mounts']
    assert mount['src'] == '~/.config/gb10-serving'  # the default folder: an existing key and CA carry over
    extra = dict(arg.split('=', 1) for arg in shlex.split(settings['ansible-navigator']['ansible']['cmdline'])
                 if '=' in arg)
    assert extra['gb10_controller_dir'] == mount['dest']
    assert os.path.dirname(extra['gb10_known_hosts_file']) == mount['dest']
    assert ee['environment-variables']['set']['ANSIBLE_SSH_COMMON_ARGS'] == (
        '-o UserKnownHostsFile=%s' % extra['gb10_known_hosts_file'])
