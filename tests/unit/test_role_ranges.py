"""Numeric settings out of range are refused by a role's first task, before it changes anything
. argument_specs.yml gives types and choices but cannot say "a port is 1..65535", so
vllm_serve, serving_containers, model_sync, leak_recovery and serving_image open with a range check that names the
host, the variable, the range and the fix.

Each case runs the role for real through ansible-runner and reads the failure from the run's
events. The host is an SSH address where nothing listens (loopback, port 1): the range check is an
assert, which runs on the controller, and any task after it that would touch a host finds it
unreachable, so no case can change this machine.
"""
import os
import sys

import ansible_runner
import pytest
import yaml

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H6")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RANGE_TASKS = {
    'vllm_serve': 'Refuse ports and timeouts out of range before anything starts',
    'serving_containers': 'Refuse ports, counts and timeouts out of range before any container starts',
    'model_sync': 'Refuse a port or stream count out of range before anything is copied',
    'leak_recovery': 'Refuse thresholds and timeouts out of range before any container stops',
    'serving_image': 'Refuse numbers out of range before anything changes',
}
PROFILE = os.path.join(TOP, 'profiles', 'minimax-m27-nvfp4.yml')
# What each role needs besides the bad value (required options, nothing that is used before the
# range check).
REQUIRED = {
    'vllm_serve': lambda: {'vllm_serve_profile': yaml.safe_load(open(PROFILE))},
    # Run alone (no base role's launch resolved), the engine's roles are given a profile.
    'serving_containers': lambda: {'serving_containers_profile': yaml.safe_load(open(PROFILE))},
    'model_sync': lambda: {'model_sync_path': '/srv/models/none'},
    'leak_recovery': dict,
    'serving_image': lambda: {'serving_image_name': 'vllm/vllm-openai:v0.17.0'},
}

CASES = [
    ('vllm_serve', 'vllm_serve_port', 70000, '1..65535'),
    ('vllm_serve', 'vllm_serve_poll_s', 0, '1..vllm_serve_readiness_timeout_s'),
    ('vllm_serve', 'vllm_serve_placement_wait_s', 0, '1 or more'),
    ('serving_containers', 'serving_containers_port', 0, '1..65535'),
    ('serving_containers', 'serving_containers_num_gpus', 0, '1..8'),
    ('serving_containers', 'serving_containers_wait_timeout_s', -5, '1 or more'),
    ('serving_containers', 'serving_containers_poll_s', 0, '1 or more'),
    ('serving_containers', 'serving_containers_gpus', 'sometimes', 'auto, true or false'),
    ('model_sync', 'model_sync_streams', 0, '1..32'),
    ('model_sync', 'model_sync_port', 65536, '1..65535'),
    ('leak_recovery', 'leak_recovery_leak_threshold_gib', 0, 'above 0'),
    ('leak_recovery', 'leak_recovery_max_imbalance', 1.5, 'above 0 and below 1'),
    ('leak_recovery', 'leak_recovery_utilization_ceiling', 0.95, 'at most 0.90'),
    ('leak_recovery', 'leak_recovery_reboot_timeout', 5, '60 or more'),
    ('serving_image', 'serving_image_copy_timeout_s', 30, '60..86400'),
    ('serving_image', 'serving_image_poll_s', 0, '1..600'),
]


def run_role(tmp_path, role, role_vars):
    playbook = tmp_path / 'play.yml'
    playbook.write_text(yaml.safe_dump([{
        'name': 'One role', 'hosts': 'gb10_cluster', 'gather_facts': False,
        'roles': [{'role': 'gb10.serving.' + role, 'vars': role_vars}]}]))
    inventory = tmp_path / 'hosts.ini'
    inventory.write_text('[gb10_cluster]\nspark1 ansible_host=127.0.0.1 ansible_port=1 '
                         'ansible_python_interpreter=/usr/bin/python3 gb10_cluster_ip=10.0.0.1\n')
    (tmp_path / 'runner').mkdir()
    return ansible_runner.run(
        private_data_dir=str(tmp_path / 'runner'), playbook=str(playbook), inventory=str(inventory),
        quiet=True, timeout=300,
        envvars={'ANSIBLE_COLLECTIONS_PATH': os.path.join(TOP, '.collections'), 'ANSIBLE_NOCOLOR': '1',
                 'PATH': os.path.dirname(sys.executable) + os.pathsep + os.environ.get('PATH', '')})


def tasks_run(runner):
    """The role's tasks that started, without ansible's own argument-spec validation."""
    return [e['event_data']['task'] for e in runner.events if e.get('event') == 'runner_on_start'
            and not e['event_data']['task'].startswith('Validating arguments against arg spec')]


def failures(runner):
    return [e['event_data']['res'] for e in runner.events if e.get('event') == 'runner_on_failed']


@pytest.mark.parametrize('role,var,value,expected', CASES, ids=['%s=%s' % (c[1], c[2]) for c in CASES])
def test_out_of_range_is_refused_by_the_first_task(tmp_path, role, var, value, expected):
    role_vars = REQUIRED[role]()
    role_vars[var] = value

    runner = run_role(tmp_path, role, role_vars)

    assert runner.status == 'failed', runner.stdout.read()
    # The range check is the only task that ran: nothing was changed before it.
    assert tasks_run(runner) == [RANGE_TASKS[role]], tasks_run(runner)
    messages = [res['msg'] for res in failures(runner)]
    assert len(messages) == 1, messages
    assert messages[0].startswith('host spark1: %s=%s is out of range, it must be ' % (var, value)), messages
    assert expected in messages[0] and 'Fix:' in messages[0], messages


@pytest.mark.parametrize('role', sorted(RANGE_TASKS))
def test_defaults_pass_the_range_check(tmp_path, role):
    """With its defaults the check passes and the run goes on to the role's next task (which then
    finds the host unreachable: only the check's own result matters here)."""
    runner = run_role(tmp_path, role, REQUIRED[role]())

    oks = [e for e in runner.events if e.get('event') == 'runner_on_ok'
           and e['event_data']['task'] == RANGE_TASKS[role]]
    assert oks, (tasks_run(runner), runner.stdout.read())
    assert len(tasks_run(runner)) > 1
