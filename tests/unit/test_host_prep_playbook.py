"""playbooks/steps/04_host_prep.yml (drift.yml's fix for H1 and N1-N6 on one node) refuses to run without a
profile, naming it, and the next step printed is the user's own command."""
import pytest
import os
import subprocess
import sys

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O3")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_host_prep_without_a_profile_names_it_and_the_users_command(tmp_path):
    (tmp_path / 'hosts.ini').write_text('[gb10_cluster]\nspark1 ansible_connection=local\n')
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / 'facts'))
    inventory = str(tmp_path / 'hosts.ini')
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'),
                           'playbooks/steps/04_host_prep.yml', '-i', inventory, '--limit', 'spark1',
                           '-e', 'ansible_python_interpreter=' + sys.executable],
                          cwd=TOP, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode != 0
    assert 'gb10_profile is not set and spark1 records no launch that served' in proc.stdout, proc.stdout
    assert 'pass -e gb10_profile=' in proc.stdout, proc.stdout
    assert ('fix what the message names, then run `ansible-playbook playbooks/steps/04_host_prep.yml -i %s '
            '-e ansible_python_interpreter=%s --limit spark1` again' % (inventory, sys.executable)) in proc.stdout
