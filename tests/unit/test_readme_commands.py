# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every command README.md prints works when pasted, as far as it can without Sparks: each script
it names is there and takes the subcommand given, each playbook it runs passes Ansible's syntax
check with the inventory it names, each playbook of its tables is there, and the client's key and
CA files are the ones the roles write for the example inventory's head. The commands that need
real Sparks run in e2e on the simulated cluster (the deploy, known_hosts, the printed curl)."""
import os
import re
import shlex
import subprocess
import sys

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


def readme():
    with open(os.path.join(TOP, 'README.md')) as handle:
        return handle.read()


def commands():
    """The README's indented code lines, a comment after `#` left out, continuation lines joined."""
    out, pending = [], ''
    for line in readme().splitlines():
        if not line.startswith('    ') or not line.strip():
            continue
        text = pending + line.strip()
        pending = ''
        if text.endswith('\\'):
            pending = text[:-1] + ' '
            continue
        text = re.sub(r'\s+#.*$', '', text)
        if text and not text.startswith('#'):
            out.append(text)
    return out


def words(command):
    return [w for part in command.split('&&') for w in [shlex.split(part.strip())]]


def test_the_readme_prints_commands():
    assert len(commands()) >= 6, commands()


@pytest.mark.parametrize('argv', [w for c in commands() for w in words(c) if w[0].startswith('scripts/')],
                         ids=' '.join)
def test_each_script_it_names_is_there_and_takes_its_subcommand(argv):
    path = os.path.join(TOP, argv[0])
    assert os.path.isfile(path) and os.access(path, os.X_OK), argv[0]
    if len(argv) > 1:
        with open(path) as handle:
            # A script with subcommands lists each as a case of its dispatch.
            assert re.search(r'(?m)^\s*(?:[\w-]+\s*\|\s*)*%s(?:\s*\|\s*[\w-]+)*\)' % re.escape(argv[1]), handle.read()), argv


@pytest.mark.parametrize('argv', [w for c in commands() for w in words(c) if w[0] == 'ansible-playbook'],
                         ids=' '.join)
def test_each_playbook_it_runs_passes_the_syntax_check_with_its_inventory(argv):
    playbook = argv[1]
    inventory = argv[argv.index('-i') + 1]
    assert os.path.isfile(os.path.join(TOP, playbook)) and os.path.isfile(os.path.join(TOP, inventory)), argv
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '--syntax-check',
                          '-i', inventory, playbook], cwd=TOP, capture_output=True, text=True, timeout=300, check=False,
                         env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections')))
    assert out.returncode == 0, out.stdout + out.stderr


def test_each_playbook_of_its_tables_is_there():
    named = set(re.findall(r'^\| `((?:steps/)?[\w-]+\.yml)', readme(), re.M))
    named |= set(re.findall(r'`((?:steps/)?[\w-]+\.yml)`', readme()))
    assert {'status.yml', 'report.yml', 'deploy-m27.yml', 'steps/10_launch.yml'} <= named, named
    missing = [name for name in sorted(named) if not os.path.isfile(os.path.join(TOP, 'playbooks', name))
               and not os.path.isfile(os.path.join(TOP, name))]
    assert not missing, missing


def test_the_clients_key_and_ca_are_the_files_the_roles_write_for_the_example_head(tmp_path):
    # The roles' own defaults, rendered by Ansible for inventory/sparks.ini's head.
    play = tmp_path / 'paths.yml'
    play.write_text(
        '- hosts: spark1\n  gather_facts: false\n  connection: local\n'
        '  vars_files:\n'
        '    - %(top)s/roles/cluster/defaults/main.yml\n'
        '    - %(top)s/roles/api_key/defaults/main.yml\n'
        '    - %(top)s/roles/api_gateway/defaults/main.yml\n'
        '    - %(top)s/roles/api_gateway/vars/main.yml\n'
        '  tasks:\n'
        '    - ansible.builtin.debug:\n'
        '        msg: "PATHS {{ api_key_file }} {{ api_gateway_controller_ca }}"\n' % {'top': TOP})
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i',
                          os.path.join(TOP, 'inventory', 'sparks.ini'), str(play)], cwd=TOP, capture_output=True,
                         text=True, timeout=300, check=False,
                         env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections'), HOME='/home/u'))
    assert out.returncode == 0, out.stdout + out.stderr
    key_file, ca_file = re.search(r'PATHS (\S+) ([^\s"]+)', out.stdout).groups()
    client = [c for c in commands() if 'GB10_API_KEY=' in c or '--cacert' in c]
    assert len(client) == 2, commands()
    assert key_file.replace('/home/u', '~') in client[0], (key_file, client[0])
    assert ca_file.replace('/home/u', '~') in client[1], (ca_file, client[1])
