# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A lookup as a playbook calls it: `ansible localhost -m debug -a msg=<expression>` with the
checkout's collection and configuration, the environment the test gives (XDG_STATE_HOME unset)."""
import os
import subprocess
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


@pytest.fixture
def lookup_msg():
    """lookup_msg(env_overrides, expression, extra=()) -> (rc, stdout and stderr)."""
    def run(env_overrides, expr, extra=()):
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections'), ANSIBLE_NOCOLOR='1',
                   ANSIBLE_CONFIG=os.path.join(TOP, 'ansible.cfg'))
        env.pop('XDG_STATE_HOME', None)
        env.update(env_overrides)
        proc = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), 'ansible'), 'localhost', '-c', 'local', '-m',
             'ansible.builtin.debug', '-a', 'msg=' + expr] + list(extra),
            cwd=TOP, env=env, capture_output=True, text=True, timeout=120, check=False)
        return proc.returncode, proc.stdout + proc.stderr
    return run
