# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A weak API key is refused before anything changes, and never printed.

playbooks/deploy.yml runs for real through ansible-runner, as `ansible-playbook ... -e
gb10_api_key=...` would. The host is an SSH address where nothing listens (loopback, port 1): the
key check runs on the controller, so a refusal shows as the check's failure with no host ever
contacted, and a key that passes lets the run go on to its next task.
"""
import json
import os
import sys

import ansible_runner
import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = 'Refuse a key that is too short or too simple'
JUDGE = 'Judge the API key without printing it'


def deploy(tmp_path, extravars, playbook='deploy.yml'):
    inventory = tmp_path / 'hosts.ini'
    inventory.write_text('[gb10_cluster]\nspark1 ansible_host=127.0.0.1 ansible_port=1 '
                         'ansible_python_interpreter=/usr/bin/python3 gb10_cluster_ip=10.0.0.1\n')
    (tmp_path / 'runner').mkdir()
    return ansible_runner.run(
        private_data_dir=str(tmp_path / 'runner'), playbook=os.path.join(TOP, 'playbooks', playbook),
        inventory=str(inventory), quiet=True, timeout=300,
        extravars=dict({'gb10_profile': 'minimax-m27-nvfp4',
                        'api_key_file': str(tmp_path / 'keys' / 'spark1.api-key')}, **extravars),
        envvars={'ANSIBLE_COLLECTIONS_PATH': os.path.join(TOP, '.collections'), 'ANSIBLE_NOCOLOR': '1',
                 'PATH': os.path.dirname(sys.executable) + os.pathsep + os.environ.get('PATH', '')})


def started(runner):
    return [e['event_data']['task'] for e in runner.events if e.get('event') == 'runner_on_start']


def failures(runner):
    return [(e['event_data']['task'], e['event_data']['res'].get('msg', ''))
            for e in runner.events if e.get('event') == 'runner_on_failed']


def everything_printed(runner):
    return json.dumps(list(runner.events)) + runner.stdout.read()


@pytest.mark.parametrize('key,expected', [
    # Keys that no uuid, timestamp or word in the output can contain by chance.
    ('kY#', 'it has 3 characters, the minimum is 32'),
    ('QzX_9876-' * 4, 'repeats a 9-character part'),
], ids=['3-characters', 'repeated'])
def test_deploy_refuses_a_weak_key_in_its_first_play_without_printing_it(tmp_path, key, expected):
    runner = deploy(tmp_path, {'gb10_api_key': key})

    assert runner.status == 'failed'
    # The refusal is the run's only failure, before the profile is even resolved: preflight and
    # every play after it never started, and no host was contacted.
    assert failures(runner) and {task for task, unused in failures(runner)} == {CHECK}, failures(runner)
    assert started(runner)[-1] == CHECK and 'Check hosts, memory, driver, link and fit' not in started(runner)
    assert not [e for e in runner.events if e.get('event') == 'runner_on_unreachable']
    message = failures(runner)[0][1]
    assert message.startswith('host spark1: gb10_api_key (api_key_value) is too weak'), message
    assert expected in message and 'at least 32 characters' in message, message
    assert 'Fix: leave gb10_api_key unset' in message and 'openssl rand -hex 24' in message, message
    assert key not in everything_printed(runner)
    assert not (tmp_path / 'keys').exists()  # nothing generated either


def test_a_weak_key_kept_on_the_controller_is_refused_naming_the_file(tmp_path):
    keys = tmp_path / 'keys'
    keys.mkdir()
    (keys / 'spark1.api-key').write_text('short-kept-key')

    runner = deploy(tmp_path, {})

    assert runner.status == 'failed'
    assert {task for task, unused in failures(runner)} == {CHECK}, failures(runner)
    message = failures(runner)[0][1]
    assert ('host spark1: the key kept in %s is too weak' % (keys / 'spark1.api-key')) in message, message
    assert 'it has 14 characters, the minimum is 32' in message and 'Fix: delete' in message, message
    assert 'short-kept-key' not in everything_printed(runner)


@pytest.mark.parametrize('extravars', [{}, {'gb10_api_key': 'from-the-vault-0123456789abcdef0123456789'}],
                         ids=['generated-later', 'vaulted'])
def test_a_good_or_absent_key_passes_and_the_run_goes_on(tmp_path, extravars):
    runner = deploy(tmp_path, extravars)

    oks = [e for e in runner.events if e.get('event') == 'runner_on_ok' and e['event_data']['task'] == CHECK]
    assert oks, (started(runner), failures(runner))
    # The run went on past the check (to where the unreachable host stops it).
    assert CHECK not in {task for task, unused in failures(runner)}
    assert started(runner).index("Resolve the launch's profile (M1)") > started(runner).index(CHECK)


@pytest.mark.parametrize('playbook', ['deploy.yml', 'steps/02_preflight.yml', 'steps/10_launch.yml'])
def test_the_deploy_refuses_an_engine_it_does_not_launch(tmp_path, playbook):
    # gb10_engine=sglang passed preflight's SGLang checks and then deployed vLLM all the same
    # each entry point of the deploy refuses it in its first play, no host contacted.
    runner = deploy(tmp_path, {'gb10_engine': 'sglang'}, playbook=playbook)

    assert runner.status == 'failed'
    refusal = 'Refuse an engine the deploy does not launch'
    assert [task for task, unused in failures(runner)] == [refusal], failures(runner)
    assert not [e for e in runner.events if e.get('event') == 'runner_on_unreachable']
    message = failures(runner)[0][1]
    assert message.startswith('host spark1: gb10_engine=sglang, but this deploy launches vLLM only'), message
    assert 'nothing was changed' in message and 'role gb10.serving.sglang_serve' in message, message
