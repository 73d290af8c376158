"""playbooks/deploy.yml is a chain of step playbooks, each of which runs alone, and the
profile is looked up in one place (role gb10.serving.cluster, entry point context).

The structure is read from the YAML; the behaviour of a step run alone is shown by running
10_launch.yml for real through ansible-runner against an SSH address where nothing listens (loopback,
port 1): its first task, the API key check, runs on the controller, so a weak key is refused
before any host is contacted, as 02_preflight.yml does within the whole deploy. The e2e suite runs
10_launch.yml alone on the simulated cluster (the not-ready and worker-killed cases) and deploy.yml
as a whole.
"""
import pytest
import glob
import os
import sys

import ansible_runner
import yaml

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("M1")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOKS = os.path.join(TOP, 'playbooks')
# The steps in the order they run: the folder's listing (09_api_gateway.yml is 10_launch.yml's first part).
STEPS = ['steps/' + name for name in ('01_converged.yml', '02_preflight.yml', '03_cluster_link.yml', '04_host_prep.yml',
                                      '05_serving_image.yml', '06_serving_state.yml', '07_link_measure.yml',
                                      '08_model_sync.yml', '10_launch.yml', '11_converged_stamp.yml')]
# On a converged cluster these steps' plays end before their first task; link_measure
# says why it does not measure, the launch's last plays run the kept engine's smoke test and the
# summary.
ENDED_WHEN_CONVERGED = ['steps/' + name for name in ('02_preflight.yml', '03_cluster_link.yml', '04_host_prep.yml',
                                                     '05_serving_image.yml', '06_serving_state.yml', '08_model_sync.yml',
                                                     '09_api_gateway.yml', '10_launch.yml')]
CONTEXT = {'name': 'gb10.serving.cluster', 'tasks_from': 'context'}


def load(name):
    with open(os.path.join(PLAYBOOKS, name)) as f:
        return yaml.safe_load(f)


def play_tasks(play):
    return (play.get('pre_tasks') or []) + (play.get('tasks') or [])


def test_deploy_is_the_chain_of_steps_in_runbook_order():
    entries = load('deploy.yml')

    assert all(set(e) == {'name', 'ansible.builtin.import_playbook'} for e in entries), entries
    assert [e['ansible.builtin.import_playbook'] for e in entries] == STEPS
    for step in STEPS:
        assert os.path.isfile(os.path.join(PLAYBOOKS, step)), step
    # Entry points at the top, the steps in their own folder, listed in the order they run.
    listed = sorted(n for n in os.listdir(os.path.join(PLAYBOOKS, 'steps')) if n.endswith('.yml'))
    assert [n for n in listed if n != '09_api_gateway.yml'] == [s.split('/')[1] for s in STEPS], listed


def test_the_steps_a_converged_cluster_skips_end_before_their_first_task():
    for step in ENDED_WHEN_CONVERGED:
        # 10_launch.yml starts by importing 09_api_gateway.yml, which is checked as a step of its own.
        plays = [play for play in load(step) if 'ansible.builtin.import_playbook' not in play]
        # 10_launch.yml: the engine check, leak recovery and the page cache drop; the Ray/engine play runs the smoke test.
        for play in plays[:3] if step == "steps/10_launch.yml" else plays:
            first = play_tasks(play)[0]
            assert first.get('ansible.builtin.meta') == 'end_play', (step, play['name'], first)
            assert first.get('when') == 'gb10_deploy_converged', (step, play['name'])


# Roles whose defaults read the resolved profile (gb10_deploy_profile): including an entry point of
# one whose argument spec takes the profile uses it.
ENGINE_ROLES = ('gb10.serving.vllm_serve', 'gb10.serving.serving_containers')


def _reads_the_profile(include):
    if include.get('name') not in ENGINE_ROLES:
        return False
    role = include['name'].rsplit('.', maxsplit=1)[-1]
    with open(os.path.join(TOP, 'roles', role, 'meta', 'argument_specs.yml')) as f:
        entry = yaml.safe_load(f)['argument_specs'][include.get('tasks_from') or 'main']
    return role + '_profile' in (entry.get('options') or {})


def test_every_step_that_reads_the_profile_resolves_the_context_first():
    # Run alone, a step has no earlier play: the first of its plays that uses the profile must
    # include the context before it does (later plays of the same run keep the host facts).
    for step in STEPS:
        resolved = False
        for play in load(step):
            for task in play_tasks(play):
                text = yaml.safe_dump(task)
                if task.get('ansible.builtin.import_role') == CONTEXT:
                    resolved = True
                elif (('gb10_deploy_profile' in text and 'gb10_deploy_profile is not defined' not in text)
                      or _reads_the_profile(task.get('ansible.builtin.include_role') or {})):
                    assert resolved, '%s: %r uses the profile before the context' % (step, task.get('name'))
            for role in play.get('roles') or []:
                assert resolved or 'gb10_deploy_profile' not in yaml.safe_dump(role), (step, role)


@pytest.mark.rule("M1")
def test_the_profile_is_looked_up_in_one_place():
    users = []
    for path in glob.glob(os.path.join(PLAYBOOKS, '**', '*.yml'), recursive=True):
        with open(path) as f:
            if "lookup('gb10.serving.profile'" in f.read():
                users.append(os.path.relpath(path, PLAYBOOKS))
    assert users == []
    # The base role's launch entry point: the run's own launch (context) and a recorded one (rollback, O8).
    base = os.path.join(os.path.dirname(PLAYBOOKS), 'roles', 'cluster', 'tasks')
    users = [name for name in sorted(os.listdir(base)) if "lookup('gb10.serving.profile'" in open(os.path.join(base, name)).read()]
    assert users == ['launch.yml'], users


def test_the_engine_roles_read_the_resolved_profile_and_no_playbook_hands_it_on():
    # The engine's roles (vllm_serve, serving_containers) read the launch's profile where the base role
    # resolved it (gb10_deploy_profile), as they read the head's address: a playbook that handed
    # them another would launch one profile and check or record another. preflight, which can look
    # a profile up by name, gets the resolved one from its step.
    roles = os.path.join(os.path.dirname(PLAYBOOKS), 'roles')
    for role in (name.rsplit('.', maxsplit=1)[-1] for name in ENGINE_ROLES):
        with open(os.path.join(roles, role, 'defaults', 'main.yml')) as f:
            assert yaml.safe_load(f)[role + '_profile'] == '{{ gb10_deploy_profile }}', role
    handed = []
    preflight = []
    for path in glob.glob(os.path.join(PLAYBOOKS, '**', '*.yml'), recursive=True):
        with open(path) as f:
            plays = yaml.safe_load(f) or []
        # A task file of steps/tasks/ is a list of tasks; a playbook, a list of plays.
        plays = plays if os.path.basename(os.path.dirname(path)) != 'tasks' else [{'tasks': plays}]
        for play in plays:
            tasks = (play.get('tasks') or []) + (play.get('pre_tasks') or [])
            while tasks:
                task = tasks.pop()
                for section in ('block', 'rescue', 'always'):
                    tasks.extend(task.get(section) or [])
                include = task.get('ansible.builtin.include_role') or {}
                given = task.get('vars') or {}
                # teardown.yml's removal of the engine-rank program resolves no launch: it says so ({}).
                handed += [(os.path.relpath(path, PLAYBOOKS), name) for name in ('vllm_serve_profile', 'serving_containers_profile')
                           if given.get(name) not in (None, {})]
                if include.get('name') == 'gb10.serving.preflight':
                    preflight.append((os.path.basename(path), str(given.get('preflight_profile', ''))))
    assert handed == [], handed
    assert preflight and all('gb10_deploy_profile' in given for unused, given in preflight), preflight


def test_launch_alone_refuses_a_weak_key_before_contacting_any_host(tmp_path):
    inventory = tmp_path / 'hosts.ini'
    inventory.write_text('[gb10_cluster]\nspark1 ansible_host=127.0.0.1 ansible_port=1 '
                         'ansible_python_interpreter=/usr/bin/python3 gb10_cluster_ip=10.0.0.1\n')
    (tmp_path / 'runner').mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(tmp_path / 'runner'), playbook=os.path.join(PLAYBOOKS, 'steps', '10_launch.yml'),
        inventory=str(inventory), quiet=True, timeout=300,
        extravars={'gb10_profile': 'minimax-m27-nvfp4', 'gb10_api_key': 'kY#',
                   'api_key_file': str(tmp_path / 'keys' / 'spark1.api-key')},
        envvars={'ANSIBLE_COLLECTIONS_PATH': os.path.join(TOP, '.collections'), 'ANSIBLE_NOCOLOR': '1',
                 'PATH': os.path.dirname(sys.executable) + os.pathsep + os.environ.get('PATH', '')})

    assert runner.status == 'failed'
    failed = [e['event_data'] for e in runner.events if e.get('event') == 'runner_on_failed']
    assert [d['task'] for d in failed] == ['Refuse a key that is too short or too simple'], failed
    assert 'host spark1: gb10_api_key (api_key_value) is too weak' in failed[0]['res']['msg']
    assert not [e for e in runner.events if e.get('event') == 'runner_on_unreachable']


def test_a_setting_under_the_renamed_roles_old_name_is_refused_before_any_node_is_read(tmp_path):
    # ray_cluster became serving_containers: its old settings would count for nothing, even on a
    # converged cluster, so the deploy's first play refuses one with the name that replaces it.
    inventory = tmp_path / 'hosts.ini'
    inventory.write_text('[gb10_cluster]\nspark1 ansible_host=127.0.0.1 ansible_port=1 '
                         'ansible_python_interpreter=/usr/bin/python3 gb10_cluster_ip=10.0.0.1 '
                         'ray_cluster_dashboard=true\n')
    (tmp_path / 'runner').mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(tmp_path / 'runner'), playbook=os.path.join(PLAYBOOKS, 'deploy-m27.yml'),
        inventory=str(inventory), quiet=True, timeout=300,
        extravars={'api_key_file': str(tmp_path / 'keys' / 'spark1.api-key')},
        envvars={'ANSIBLE_COLLECTIONS_PATH': os.path.join(TOP, '.collections'), 'ANSIBLE_NOCOLOR': '1',
                 'PATH': os.path.dirname(sys.executable) + os.pathsep + os.environ.get('PATH', '')})

    assert runner.status == 'failed'
    failed = [e['event_data'] for e in runner.events if e.get('event') == 'runner_on_failed']
    assert [d['task'] for d in failed] == ["Refuse settings under the role's old name (ray_cluster_*)"], failed
    msg = failed[0]['res']['msg']
    assert 'host spark1: ray_cluster_dashboard is set' in msg and 'serving_containers_dashboard' in msg, msg
    assert not [e for e in runner.events if e.get('event') == 'runner_on_unreachable']
