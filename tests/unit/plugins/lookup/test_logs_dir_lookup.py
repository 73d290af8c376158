# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""lookup('gb10.serving.logs_dir'), the one definition of the controller's logs folder (gb10_logs_dir, else
the XDG state folder), as a playbook calls it."""
import os
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def logs_dir(env_overrides, expr="{{ lookup('gb10.serving.logs_dir') }}", extra=()):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_CONFIG=os.path.join(TOP, 'ansible.cfg'))
    env.pop('XDG_STATE_HOME', None)
    env.update(env_overrides)
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), 'ansible'), 'localhost', '-c', 'local', '-m',
         'ansible.builtin.debug', '-a', 'msg=' + expr] + list(extra),
        cwd=TOP, env=env, capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_home_folder_when_xdg_state_home_is_not_set(tmp_path):
    rc, out = logs_dir({'HOME': str(tmp_path)})
    assert rc == 0, out
    assert 'msg: %s/.local/state/gb10-serving/logs\n' % tmp_path in out, out


def test_xdg_state_home_when_set(tmp_path):
    rc, out = logs_dir({'HOME': str(tmp_path / 'home'), 'XDG_STATE_HOME': str(tmp_path / 'state')})
    assert rc == 0, out
    assert 'msg: %s/state/gb10-serving/logs\n' % tmp_path in out, out


def test_terms_are_refused(tmp_path):
    rc, out = logs_dir({'HOME': str(tmp_path)}, "{{ lookup('gb10.serving.logs_dir', 'somewhere') }}")
    assert rc != 0 and 'takes no terms' in out, out


def test_gb10_logs_dir_when_set_rendered_as_any_variable(tmp_path):
    rc, out = logs_dir({'HOME': str(tmp_path)}, extra=['-e', 'gb10_logs_base=%s' % tmp_path,
                                                       '-e', 'gb10_logs_dir={{ gb10_logs_base }}/mine'])
    assert rc == 0, out
    assert 'msg: %s/mine\n' % tmp_path in out, out
