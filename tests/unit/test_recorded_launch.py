# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Day two: a run without gb10_profile takes the launch the head records as serving (role cluster,
tasks_from context), run for real through ansible-runner on this machine (a local connection; the
record is a file of the test's own, as the head keeps /etc/gb10/served-profile.json). An explicit
gb10_profile wins; a record of other nodes is refused naming both; no record asks for the profile.
"""
import json
import os
import sys

import ansible_runner
import pytest
import yaml

pytestmark = pytest.mark.rule("M1")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_local(tmp_path, playbook, extravars):
    """The runner of a playbook against two local hosts (spark1 the head), as root without become."""
    inventory = tmp_path / 'hosts.ini'
    inventory.write_text('[gb10_cluster]\nspark1 ansible_connection=local ansible_python_interpreter=%s '
                         'gb10_cluster_ip=10.0.0.1\nspark2 ansible_connection=local ansible_python_interpreter=%s '
                         'gb10_cluster_ip=10.0.0.2\n' % (sys.executable, sys.executable))
    (tmp_path / 'runner').mkdir()
    return ansible_runner.run(
        private_data_dir=str(tmp_path / 'runner'), playbook=str(playbook), inventory=str(inventory), quiet=True,
        timeout=300, extravars=dict({'ansible_become': False}, **extravars),
        envvars={'ANSIBLE_COLLECTIONS_PATH': os.path.join(TOP, '.collections'), 'ANSIBLE_NOCOLOR': '1',
                 'PATH': os.path.dirname(sys.executable) + os.pathsep + os.environ.get('PATH', '')})


def run_context(tmp_path, record=None, extravars=None):
    path = tmp_path / 'served-profile.json'
    if record is not None:
        path.write_text(json.dumps(record))
    playbook = tmp_path / 'play.yml'
    playbook.write_text(yaml.safe_dump([{
        'name': 'The run context', 'hosts': 'gb10_cluster', 'gather_facts': False,
        'tasks': [{'name': 'Context',
                   'ansible.builtin.import_role': {'name': 'gb10.serving.cluster', 'tasks_from': 'context'}},
                  {'name': 'Say the launch', 'ansible.builtin.debug': {
                      'msg': '{{ gb10_deploy_profile.name }} {{ gb10_profile_overlay }} {{ gb10_executor }} '
                             '{{ gb10_deploy_profile.image }}'}}]}]))
    runner = run_local(tmp_path, playbook, dict({'gb10_served_record': str(path)}, **(extravars or {})))
    said = [e['event_data']['res']['msg'] for e in runner.events if e.get('event') == 'runner_on_ok'
            and e['event_data'].get('task') == 'Say the launch']
    failed = [e['event_data']['res'].get('msg', '') for e in runner.events if e.get('event') == 'runner_on_failed']
    return runner.status, said, failed


def test_a_run_without_a_profile_takes_the_recorded_launch_with_its_variables(tmp_path):
    record = {'profile': 'minimax-m27-nvfp4', 'nodes': ['spark1', 'spark2'],
              'vars': {'gb10_profile_overlay': 'sim-cpu', 'gb10_executor': 'mp', 'gb10_profiles_dir': ''}}
    status, said, failed = run_context(tmp_path, record)
    assert status == 'successful', failed
    assert said == ['minimax-m27-nvfp4 sim-cpu mp gb10-sim-serving:local'] * 2, said


def test_an_explicit_profile_wins_over_the_record(tmp_path):
    record = {'profile': 'minimax-m27-nvfp4', 'nodes': ['spark1', 'spark2'], 'vars': {'gb10_executor': 'mp'}}
    status, said, failed = run_context(tmp_path, record, {'gb10_profile': 'minimax-m27-mxfp4'})
    assert status == 'successful', failed
    assert said and all(line.startswith('minimax-m27-mxfp4  ') for line in said), said


def test_a_record_of_other_nodes_is_refused_naming_both(tmp_path):
    record = {'profile': 'minimax-m3-nvfp4', 'nodes': ['spark1', 'spark2', 'spark3'], 'vars': {}}
    status, said, failed = run_context(tmp_path, record)
    assert status == 'failed' and not said
    assert any('recorded a launch of minimax-m3-nvfp4 on nodes spark1, spark2, spark3' in m and
               'gb10_cluster is spark1, spark2' in m and "Fix: deploy this cluster's launch by name" in m
               and '/deploy.yml -i ' in m and '-e gb10_profile=<profile>' in m for m in failed), failed


@pytest.mark.rule("O8")
def test_the_recorded_image_stays_chosen_unless_the_run_names_another(tmp_path):
    # An upgrade to a new build (gb10_profile_image) is kept by every later run that names no profile;
    # upgrade.yml -e gb10_profile_image=... names the next one.
    record = {'profile': 'minimax-m27-nvfp4', 'nodes': ['spark1', 'spark2'],
              'vars': {'gb10_profile_overlay': 'sim-cpu', 'gb10_profile_image': 'gb10-sim-serving:variant'},
              'image': 'gb10-sim-serving:variant', 'image_id': 'sha256:' + '1' * 64}
    status, said, failed = run_context(tmp_path, record)
    assert status == 'successful', failed
    assert said == ['minimax-m27-nvfp4 sim-cpu  gb10-sim-serving:variant'] * 2, said
    (tmp_path / 'runner').rename(tmp_path / 'runner-1')
    status, said, failed = run_context(tmp_path, record, {'gb10_profile_image': 'gb10-sim-serving:next'})
    assert status == 'successful', failed
    assert said == ['minimax-m27-nvfp4 sim-cpu  gb10-sim-serving:next'] * 2, said


def test_no_record_asks_for_the_profile(tmp_path):
    status, said, failed = run_context(tmp_path)
    assert status == 'failed'
    assert any('gb10_profile is not set and spark1 records no launch that served' in m for m in failed), failed


def run_playbook_first_play(tmp_path, playbook, extravars):
    """(status, failed task names and messages) of one of the collection's playbooks: a refusal of its
    first play comes before any other host is asked."""
    runner = run_local(tmp_path, os.path.join(TOP, 'playbooks', playbook), extravars)
    failed = [(e['event_data']['task'], e['event_data']['res'].get('msg', '')) for e in runner.events
              if e.get('event') == 'runner_on_failed']
    return runner.status, failed


@pytest.mark.rule("O8")
def test_an_upgrade_of_a_cluster_that_never_served_is_refused_with_the_deploy_to_run(tmp_path):
    status, failed = run_playbook_first_play(tmp_path, 'upgrade.yml', {
        'gb10_served_record': str(tmp_path / 'served-profile.json'), 'gb10_profile_image': 'vllm-node:0.33.0'})
    assert status == 'failed'
    assert [task for task, unused_message in failed] == ['Refuse a cluster with no launch to return to'], failed
    message = failed[0][1]
    assert message.startswith('spark1 records no launch that served (%s): an upgrade needs one to return to. '
                              'Nothing was changed.' % (tmp_path / 'served-profile.json')), message
    assert 'Deploy first: ansible-playbook %s -i %s -e gb10_profile=<profile>' % (
        os.path.join(TOP, 'playbooks', 'deploy.yml'), tmp_path / 'hosts.ini') in message, message


@pytest.mark.rule("O8")
def test_a_rollback_where_only_one_launch_served_is_refused_before_anything_changes(tmp_path):
    status, failed = run_playbook_first_play(tmp_path, 'rollback.yml', {
        'gb10_previous_record': str(tmp_path / 'served-profile.previous.json')})
    assert status == 'failed'
    assert [task for task, unused_message in failed] == ['Refuse a cluster that keeps no launch before the one that serves'], failed
    assert failed[0][1].startswith('spark1 keeps no launch that served before the one now (%s is missing)'
                                   % (tmp_path / 'served-profile.previous.json')), failed
