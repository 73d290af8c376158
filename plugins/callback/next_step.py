# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: next_step
type: aggregate
short_description: After a failed GB10 run, say per host what stopped it and what to do next
version_added: "0.1.0"
description:
  - When a run ends with failed or unreachable hosts, prints one block per such host with the play
    and task where it stopped, the message, and the next step (restore SSH and re-run, record the
    nodes' host keys with C(known_hosts.yml) where ssh refused an unknown or changed one, or fix
    what the message names and re-run), followed by what a failed run keeps.
  - The commands it prints run when pasted from where the run was started. They repeat the user's
    own playbook, inventory, extra vars and options (C(--limit), C(--check), vault, connection);
    secrets given as extra vars (C(gb10_api_key), C(gb10_hf_token), anything named like a
    password or token) are left out of the command and named as such.
  - Quiet on a run that succeeded, and from the first play that sets C(gb10_drift_report=true) to
    the end of the run (the C(gb10.serving.drift_report) callback reports a drift run's findings
    with their fixes).
author:
  - gb10.serving developers (@gb10-serving)
requirements:
  - Enable it with C(callbacks_enabled = gb10.serving.next_step) in C(ansible.cfg) or
    C(ANSIBLE_CALLBACKS_ENABLED).
'''

from ansible import context
from ansible.plugins.callback import CallbackBase
from ansible_collections.gb10.serving.plugins.plugin_utils.cli_command import (
    adhoc_ping, left_out_note, playbook_command, sibling_playbook)

# What ssh says when the controller has not recorded a node's host key, or holds another (rule A2).
HOST_KEY_UNKNOWN = ('Host key verification failed', 'REMOTE HOST IDENTIFICATION HAS CHANGED')

# What every failed run of this collection keeps, so an operator knows a re-run is safe.
KEPT = ('A failed run keeps the files under the model path (an interrupted copy resumes, M3) and '
        'stops a serving engine only to replace it with a changed launch (O2). Container logs of a '
        'failed start are on the controller where the failure message says (H9).')


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'gb10.serving.next_step'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._play = ''
        self._quiet = False
        self._last = {}  # host -> (kind, play, task, message) of its latest failure

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name()
        play_vars = play.vars if isinstance(play.vars, dict) else {}
        # Quiet from the first drift play on: the verdict play that follows them in drift.yml
        # fails the drifted hosts, and the drift report already names each one's fix.
        self._quiet = self._quiet or str(play_vars.get('gb10_drift_report', '')).lower() in ('true', '1', 'yes')

    def _remember(self, kind, result):
        if self._quiet:
            return
        res = result._result
        message = res.get('msg') or res.get('stderr') or res.get('module_stderr') or ''
        self._last[result._host.get_name()] = (kind, self._play, result._task.get_name(),
                                               ' '.join(str(message).split()))

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._remember('failed', result)

    def v2_runner_on_unreachable(self, result):
        self._remember('unreachable', result)

    def v2_playbook_on_stats(self, stats):
        stopped = [h for h in sorted(self._last)
                   if stats.summarize(h)['failures'] or stats.summarize(h)['unreachable']]
        if not stopped:
            return
        args = dict(context.CLIARGS or {})
        rerun, left_out = playbook_command(args, run_options=True)
        note = (' (%s)' % left_out_note(left_out)) if left_out else ''
        self._display.display('NEXT STEP (gb10.serving): the run stopped on %s' % ', '.join(stopped))
        for host in stopped:
            kind, play, task, message = self._last[host]
            if kind == 'unreachable' and any(text in message for text in HOST_KEY_UNKNOWN):
                # ansible.cfg checks host keys (A2): record them once, with their fingerprints.
                record, unused = playbook_command(
                    args, playbooks=[sibling_playbook((args.get('args') or [''])[0], 'known_hosts')])
                step = ('the SSH host key of %s is not the one this controller recorded, or none is recorded: run '
                        '`%s`, compare the fingerprints it prints with the node\'s own, then run `%s` again%s'
                        % (host, record, rerun, note))
            elif kind == 'unreachable':
                step = ('bring %s back (power, cable, sshd), check it with `%s`, then run `%s` again%s: '
                        'finished steps are skipped' % (host, adhoc_ping(args, host), rerun, note))
            else:
                step = 'fix what the message names, then run `%s` again%s' % (rerun, note)
            self._display.display('- %s %s in play "%s", task "%s": %s' % (
                host, 'became unreachable' if kind == 'unreachable' else 'failed', play, task,
                message[:600]))
            self._display.display('  next: %s' % step)
        self._display.display(KEPT)
