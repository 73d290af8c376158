# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the collection keeps its state on the controller: the one definition behind the lookups
gb10.serving.controller_dir and gb10.serving.logs_dir.

What must outlive a run lives in one folder, `gb10_controller_dir`: the client keys (a lost key
file means a new key, and every client's old key refused), the cluster's CA and the head's
certificate (a lost CA means clients must fetch a new one), the reports and, when that variable
is set, the logs. A job runner that starts each run in a fresh container (ansible-navigator, AWX)
keeps them by mounting one folder and setting that one variable. Pure functions; no I/O.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

# The folder name under the user's configuration folder (the client keys were always here).
NAME = 'gb10-serving'


def _home(environ):
    return environ.get('HOME') or os.path.expanduser('~')


def controller_dir(configured, environ):
    """gb10_controller_dir when set, else ~/.config/gb10-serving (where the keys have always been)."""
    return configured or os.path.join(_home(environ), '.config', NAME)


def logs_dir(configured_logs, configured_controller, environ):
    """gb10_logs_dir when set; else <gb10_controller_dir>/logs when that is set; else the XDG state
    folder ($XDG_STATE_HOME/gb10-serving/logs, or ~/.local/state/gb10-serving/logs)."""
    if configured_logs:
        return configured_logs
    if configured_controller:
        return os.path.join(configured_controller, 'logs')
    state = environ.get('XDG_STATE_HOME') or os.path.join(_home(environ), '.local', 'state')
    return os.path.join(state, NAME, 'logs')
