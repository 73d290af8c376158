"""The commands the callbacks print, from the user's own ansible-playbook arguments."""
import pytest
import shlex

from ansible_collections.gb10.serving.plugins.plugin_utils.cli_command import (
    adhoc_ping, is_secret, left_out_note, playbook_command, sibling_playbook, split_extra_vars)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O3")

CLIARGS = {
    'args': ('playbooks/deploy.yml',),
    'inventory': ('/work/inventory/sparks.ini',),
    'extra_vars': ('gb10_profile=minimax-m27-nvfp4',),
    'check': False, 'diff': False, 'subset': None, 'tags': ('all',), 'skip_tags': (),
    'vault_ids': (), 'vault_password_files': (), 'ask_vault_pass': False, 'connection': 'ssh',
}


def test_the_users_playbook_inventory_and_extra_vars_are_repeated():
    command, left_out = playbook_command(CLIARGS, run_options=True)
    assert command == 'ansible-playbook playbooks/deploy.yml -i /work/inventory/sparks.ini -e gb10_profile=minimax-m27-nvfp4'
    assert left_out == []


def test_secrets_are_left_out_and_named():
    args = dict(CLIARGS, extra_vars=('gb10_profile=minimax-m27-nvfp4 gb10_api_key=s3cret',
                                     '{"gb10_hf_token": "hf_x", "gb10_model_download": true}',
                                     'ansible_become_password=pw', '@vars/site.yml'))
    command, left_out = playbook_command(args, run_options=True)
    assert 's3cret' not in command and 'hf_x' not in command and 'pw' not in command.split()
    assert left_out == ['ansible_become_password', 'gb10_api_key', 'gb10_hf_token']
    argv = shlex.split(command)
    assert argv[argv.index('-e') + 1] == 'gb10_profile=minimax-m27-nvfp4'
    assert '{"gb10_model_download": true}' in argv and '@vars/site.yml' in argv
    note = left_out_note(left_out)
    assert '-e gb10_api_key=...' in note and 'secrets' in note and 's3cret' not in note


def test_values_with_spaces_survive_the_shell():
    args = dict(CLIARGS, extra_vars=('gb10_profile="a b" gb10_api_key=x',))
    command, unused = playbook_command(args)
    assert shlex.split(command)[-1] == '{"gb10_profile": "a b"}'


def test_run_options_are_repeated_only_when_asked():
    args = dict(CLIARGS, check=True, diff=True, subset='spark1', tags=('x',), vault_ids=('prod@prompt',),
                remote_user='ops')
    again, unused = playbook_command(args, run_options=True)
    assert again.endswith('-u ops --vault-id prod@prompt --limit spark1 --tags x --check --diff')
    fix, unused = playbook_command(args, ['playbooks/steps/04_host_prep.yml'], limit='spark2')
    assert fix == ('ansible-playbook playbooks/steps/04_host_prep.yml -i /work/inventory/sparks.ini '
                   '-e gb10_profile=minimax-m27-nvfp4 -u ops --vault-id prod@prompt --limit spark2')


def test_ping_uses_the_same_inventory_and_connection():
    assert adhoc_ping(dict(CLIARGS, private_key_file='/k'), 'spark2') == (
        'ansible spark2 -i /work/inventory/sparks.ini -m ansible.builtin.ping '
        '-e gb10_profile=minimax-m27-nvfp4 --private-key /k')


def test_secret_names():
    assert is_secret('gb10_api_key') and is_secret('ansible_password') and is_secret('my_token')
    assert not is_secret('gb10_profile') and not is_secret('gb10_api_key_file')
    # The clients' keys, the gateway's TLS key and the Hub token under every name they pass by.
    for name in ('gb10_api_client_keys', 'api_key_client_values', 'gb10_api_tls_key', 'api_gateway_tls_key',
                 'model_sync_hub_token', 'api_gateway_clients', 'serving_image_registry_password'):
        assert is_secret(name), name
    assert not is_secret('gb10_api_tls_cert') and not is_secret('gb10_api_clients')
    assert split_extra_vars(('@x.yml',)) == (['@x.yml'], [])


def test_sibling_playbooks():
    assert sibling_playbook('playbooks/drift.yml', 'steps/04_host_prep') == 'playbooks/steps/04_host_prep.yml'
    assert sibling_playbook('/abs/playbooks/drift.yml', 'deploy') == '/abs/playbooks/deploy.yml'
    assert sibling_playbook('drift.yml', 'recover') == 'recover.yml'
    assert sibling_playbook('gb10.serving.drift', 'steps/04_host_prep') == 'gb10.serving.steps.04_host_prep'
    # A step run alone names the entry points' folder, one up (the known_hosts fix after a step).
    assert sibling_playbook('playbooks/steps/06_serving_state.yml', 'known_hosts') == 'playbooks/known_hosts.yml'
    assert sibling_playbook('steps/06_serving_state.yml', 'known_hosts') == 'known_hosts.yml'
    assert sibling_playbook('gb10.serving.steps.06_serving_state', 'known_hosts') == 'gb10.serving.known_hosts'
    assert sibling_playbook('playbooks/steps/04_host_prep.yml', 'steps/04_host_prep') == 'playbooks/steps/04_host_prep.yml'
