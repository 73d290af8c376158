# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""lookup('gb10.serving.logs_dir'), the one definition of the controller's logs folder (gb10_logs_dir, else
the XDG state folder), as a playbook calls it."""
import pytest

LOGS_DIR = "{{ lookup('gb10.serving.logs_dir') }}"


@pytest.fixture
def logs_dir(lookup_msg):
    return lambda env_overrides, expr=LOGS_DIR, extra=(): lookup_msg(env_overrides, expr, extra)


def test_the_home_folder_when_xdg_state_home_is_not_set(tmp_path, logs_dir):
    rc, out = logs_dir({'HOME': str(tmp_path)})
    assert rc == 0, out
    assert 'msg: %s/.local/state/gb10-serving/logs\n' % tmp_path in out, out


def test_xdg_state_home_when_set(tmp_path, logs_dir):
    rc, out = logs_dir({'HOME': str(tmp_path / 'home'), 'XDG_STATE_HOME': str(tmp_path / 'state')})
    assert rc == 0, out
    assert 'msg: %s/state/gb10-serving/logs\n' % tmp_path in out, out


def test_terms_are_refused(tmp_path, logs_dir):
    rc, out = logs_dir({'HOME': str(tmp_path)}, "{{ lookup('gb10.serving.logs_dir', 'somewhere') }}")
    assert rc != 0 and 'takes no terms' in out, out


def test_gb10_logs_dir_when_set_rendered_as_any_variable(tmp_path, logs_dir):
    rc, out = logs_dir({'HOME': str(tmp_path)}, extra=['-e', 'gb10_logs_base=%s' % tmp_path,
                                                       '-e', 'gb10_logs_dir={{ gb10_logs_base }}/mine'])
    assert rc == 0, out
    assert 'msg: %s/mine\n' % tmp_path in out, out
