"""Runs a real ansible-playbook with the callback enabled: one host fails a task, one cannot be
reached (SSH to a closed loopback port), one succeeds; the summary names each stopped host, where
it stopped and what to do next."""
import os
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))

PLAYBOOK = """
- name: Sync the model over the cluster link (M3)
  hosts: all
  gather_facts: false
  vars:
    gb10_drift_report: {drift}
  tasks:
    - name: Reach the node
      ansible.builtin.ping:
    - name: Pull the model
      ansible.builtin.fail:
        msg: copy from spark1 failed
      when: inventory_hostname == 'spark1'
"""

INVENTORY = """
spark1 ansible_connection=local
spark2 ansible_connection=ssh ansible_host=127.0.0.1 ansible_port=1
spark3 ansible_connection=local
"""


# drift.yml's last play: no drift marker, it fails every drifted host.
VERDICT = """
- name: Drift - verdict
  hosts: all
  gather_facts: false
  tasks:
    - name: Fail every host where a check found drift
      ansible.builtin.fail:
        msg: drifted
      when: inventory_hostname == 'spark3'
"""


def run(tmp_path, drift='false', extra=()):
    (tmp_path / 'deploy.yml').write_text(PLAYBOOK.format(drift=drift) + (VERDICT if drift == 'true' else ''))
    (tmp_path / 'hosts.ini').write_text(INVENTORY)
    env = dict(os.environ,
               ANSIBLE_CALLBACKS_ENABLED='gb10.serving.next_step',
               ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections'),
               ANSIBLE_HOST_KEY_CHECKING='False')
    cmd = [os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'),
           '-i', 'hosts.ini', '-e', 'ansible_python_interpreter=' + sys.executable] + list(extra) + ['deploy.yml']
    return subprocess.run(cmd, env=env, cwd=str(tmp_path), capture_output=True, text=True, check=False,
                          timeout=120)


def test_failed_and_unreachable_hosts_get_a_next_step(tmp_path):
    proc = run(tmp_path)
    assert proc.returncode != 0
    out = proc.stdout
    assert 'NEXT STEP (gb10.serving): the run stopped on spark1, spark2' in out
    assert ('- spark1 failed in play "Sync the model over the cluster link (M3)", task "Pull the model": '
            'copy from spark1 failed') in out
    assert '- spark2 became unreachable in play "Sync the model over the cluster link (M3)"' in out
    inventory = str(tmp_path / 'hosts.ini')
    assert 'ansible spark2 -i %s -m ansible.builtin.ping' % inventory in out
    # The user's own playbook, inventory and extra vars, as typed (here a path without quoting).
    assert 'run `ansible-playbook deploy.yml -i %s -e ansible_python_interpreter=%s` again' % (
        inventory, sys.executable) in out
    assert 'spark3 failed' not in out and 'spark3 became' not in out
    assert 'keeps the files under the model path' in out


def test_secrets_are_left_out_of_the_next_step_and_named(tmp_path):
    proc = run(tmp_path, extra=['-e', 'gb10_profile=minimax-m27-nvfp4 gb10_api_key=sekrit', '--check'])
    assert proc.returncode != 0
    assert 'sekrit' not in proc.stdout
    assert ('run `ansible-playbook deploy.yml -i %s -e ansible_python_interpreter=%s -e gb10_profile=minimax-m27-nvfp4 '
            '--check` again (left out of the command: -e gb10_api_key=...' % (tmp_path / 'hosts.ini', sys.executable)
            ) in proc.stdout


def test_drift_plays_and_clean_runs_stay_quiet(tmp_path):
    drift = run(tmp_path, drift='true')
    assert 'fatal: [spark3]' in drift.stdout  # the verdict play failed a host, quietly
    assert 'NEXT STEP' not in drift.stdout
    (tmp_path / 'ok.yml').write_text('- hosts: spark1\n  gather_facts: false\n  tasks:\n'
                                     '    - ansible.builtin.debug:\n        msg: fine\n')
    env = dict(os.environ, ANSIBLE_CALLBACKS_ENABLED='gb10.serving.next_step',
               ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections'))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', 'hosts.ini',
                           '-e', 'ansible_python_interpreter=' + sys.executable, 'ok.yml'],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0 and 'NEXT STEP' not in proc.stdout


def test_a_host_key_ssh_refused_gets_the_playbook_that_records_the_keys(tmp_path):
    # Rule A2: ssh, as the connection plugin runs it, refuses an unknown host key (exit 255 and
    # its own words, played here by a stand-in for the ssh program). The next step names
    # known_hosts.yml beside the user's playbook with the user's inventory and extra vars.
    fake_ssh = tmp_path / 'ssh'
    fake_ssh.write_text('#!/bin/sh\necho "Host key verification failed." >&2\nexit 255\n')
    fake_ssh.chmod(0o755)
    (tmp_path / 'hosts.ini').write_text('spark1 ansible_connection=ssh ansible_host=192.0.2.10 '
                                        'ansible_ssh_executable=%s\n' % fake_ssh)
    (tmp_path / 'playbooks').mkdir()
    (tmp_path / 'playbooks' / 'deploy.yml').write_text(PLAYBOOK.format(drift='false'))
    env = dict(os.environ, ANSIBLE_CALLBACKS_ENABLED='gb10.serving.next_step',
               ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections'))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', 'hosts.ini',
                           '-e', 'gb10_profile=minimax-m27-nvfp4', 'playbooks/deploy.yml'],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode != 0
    inventory = str(tmp_path / 'hosts.ini')
    assert ('next: the SSH host key of spark1 is not the one this controller recorded, or none is recorded: run '
            '`ansible-playbook playbooks/known_hosts.yml -i %s -e gb10_profile=minimax-m27-nvfp4`' % inventory
            ) in proc.stdout, proc.stdout
    assert 'then run `ansible-playbook playbooks/deploy.yml -i %s -e gb10_profile=minimax-m27-nvfp4` again' % (
        inventory) in proc.stdout
