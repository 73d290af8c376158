# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic: the command lines this collection prints (a drift fix, a failed run's next step),
built from the user's own ansible-playbook arguments (ansible's context.CLIARGS) so that they run
when pasted as printed: the same inventory, extra vars and connection options, with secrets left
out and named as such. The callback plugins only feed it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import shlex

# Extra vars never printed: the collection's secrets and anything named like a password or token.
SECRET_VARS = ('gb10_api_key', 'gb10_hf_token', 'api_key_value', 'model_sync_hf_token', 'model_sync_hub_token',
               'gb10_api_client_keys', 'api_key_client_values', 'gb10_api_tls_key', 'api_gateway_tls_key',
               'api_gateway_clients')
SECRET_PATTERN = re.compile(r'(pass(word|wd)?|secret|token|api_?key|private_key|client_keys|tls_key)$', re.IGNORECASE)
KEY_VALUE = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)=(.*)$', re.DOTALL)
# A value printed bare in `-e key=value` (anything else goes out as JSON).
PLAIN_VALUE = re.compile(r'^[A-Za-z0-9_@%+=:,./-]*$')


def is_secret(name):
    return name in SECRET_VARS or bool(SECRET_PATTERN.search(name or ''))


def _kv_pairs(text):
    """key=value pairs of one -e argument in ansible's key=value form, or None when it is not."""
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    pairs = []
    for word in words:
        match = KEY_VALUE.match(word)
        if not match:
            return None
        pairs.append((match.group(1), match.group(2)))
    return pairs


def _as_arguments(pairs):
    """-e arguments for (key, value) pairs: key=value when plain, JSON otherwise."""
    out = []
    for key, value in pairs:
        if isinstance(value, str) and PLAIN_VALUE.match(value):
            out.append('%s=%s' % (key, value))
        else:
            out.append(json.dumps({key: value}, sort_keys=True))
    return out


def split_extra_vars(extra_vars):
    """(the -e arguments to print, sorted names of the secrets left out). A @file is kept as a
    path (its contents are not printed); key=value and JSON arguments lose their secret keys."""
    kept, left_out = [], set()
    for text in extra_vars or ():
        text = str(text)
        stripped = text.strip()
        if not stripped:
            continue
        if stripped.startswith('@'):
            kept.append(stripped)
            continue
        if stripped.startswith('{'):
            try:
                data = json.loads(stripped)
            except ValueError:
                data = None
            if isinstance(data, dict):
                secrets = [k for k in data if is_secret(str(k))]
                left_out.update(str(k) for k in secrets)
                if secrets:
                    rest = dict((k, v) for k, v in data.items() if k not in secrets)
                    if rest:
                        kept.append(json.dumps(rest, sort_keys=True))
                else:
                    kept.append(stripped)
                continue
        pairs = _kv_pairs(stripped)
        if pairs is None:
            # A YAML mapping or something else this does not read: keep it as given unless it
            # names a secret anywhere.
            names = set(re.findall(r'[A-Za-z_][A-Za-z0-9_]*', stripped))
            secrets = sorted(n for n in names if is_secret(n))
            if secrets:
                left_out.update(secrets)
            else:
                kept.append(stripped)
            continue
        secrets = [k for k, unused in pairs if is_secret(k)]
        left_out.update(secrets)
        if not secrets:
            kept.append(stripped)
        else:
            kept.extend(_as_arguments([(k, v) for k, v in pairs if k not in secrets]))
    return kept, sorted(left_out)


def _options(cliargs, run_options):
    """Connection, vault and (with run_options) check/diff/limit/tags options, as given."""
    out = []
    if cliargs.get('remote_user'):
        out += ['-u', cliargs['remote_user']]
    if cliargs.get('private_key_file'):
        out += ['--private-key', cliargs['private_key_file']]
    if cliargs.get('connection') and cliargs['connection'] not in ('ssh', 'smart'):
        out += ['-c', cliargs['connection']]
    if cliargs.get('ask_pass'):
        out.append('--ask-pass')
    if cliargs.get('become'):
        out.append('--become')
    if cliargs.get('become_user'):
        out += ['--become-user', cliargs['become_user']]
    if cliargs.get('become_ask_pass'):
        out.append('--ask-become-pass')
    for vault_id in cliargs.get('vault_ids') or ():
        out += ['--vault-id', vault_id]
    for path in cliargs.get('vault_password_files') or ():
        out += ['--vault-password-file', path]
    if cliargs.get('ask_vault_pass'):
        out.append('--ask-vault-pass')
    if run_options:
        if cliargs.get('subset'):
            out += ['--limit', cliargs['subset']]
        tags = [t for t in cliargs.get('tags') or () if t != 'all']
        if tags:
            out += ['--tags', ','.join(tags)]
        if cliargs.get('skip_tags'):
            out += ['--skip-tags', ','.join(cliargs['skip_tags'])]
        if cliargs.get('check'):
            out.append('--check')
        if cliargs.get('diff'):
            out.append('--diff')
    return out


def inventory_arguments(cliargs):
    out = []
    for inventory in cliargs.get('inventory') or ():
        out += ['-i', inventory]
    return out or ['-i', '<inventory>']


def quote(argv):
    return ' '.join(shlex.quote(str(a)) for a in argv)


def playbook_command(cliargs, playbooks=None, limit=None, run_options=False):
    """(command line, secrets left out) of ansible-playbook with the user's inventory, extra vars
    and connection options. playbooks: the user's own when None. limit: a --limit of its own
    (then the user's --limit is dropped). run_options: repeat --check, --diff, --limit, --tags."""
    cliargs = cliargs or {}
    extra, left_out = split_extra_vars(cliargs.get('extra_vars'))
    argv = ['ansible-playbook'] + list(playbooks if playbooks is not None else cliargs.get('args') or ['<playbook>'])
    argv += inventory_arguments(cliargs)
    for arg in extra:
        argv += ['-e', arg]
    argv += _options(dict(cliargs, subset=None) if limit else cliargs, run_options)
    if limit:
        argv += ['--limit', limit]
    return quote(argv), left_out


def adhoc_ping(cliargs, host):
    """ansible HOST -i INVENTORY -m ansible.builtin.ping with the user's connection options."""
    cliargs = cliargs or {}
    extra, unused = split_extra_vars(cliargs.get('extra_vars'))
    argv = ['ansible', host] + inventory_arguments(cliargs) + ['-m', 'ansible.builtin.ping']
    for arg in extra:
        argv += ['-e', arg]
    return quote(argv + _options(cliargs, False))


def left_out_note(left_out):
    """What a printed command leaves out, or '' when nothing."""
    if not left_out:
        return ''
    return ('left out of the command: %s (secret%s: add %s as you gave %s, or keep %s in '
            'ansible-vault)' % (', '.join('-e %s=...' % n for n in left_out),
                                's' if len(left_out) > 1 else '',
                                'them' if len(left_out) > 1 else 'it',
                                'them' if len(left_out) > 1 else 'it',
                                'them' if len(left_out) > 1 else 'it'))


def sibling_playbook(playbook, name):
    """The playbook `name` (a step under steps/ too) beside the entry points of `playbook`: a path
    keeps its folder and extension, an FQCN (gb10.serving.drift) its namespace (a folder as a dot,
    a dash as an underscore). A step (playbooks/steps/06_serving_state.yml) names its entry points'
    folder, one up: the steps live under the entry points, never beside them."""
    playbook = str(playbook or '')
    if '/' in playbook or playbook.endswith(('.yml', '.yaml')):
        folder, unused, base = playbook.rpartition('/')
        ext = '.yaml' if base.endswith('.yaml') else '.yml'
        if folder == 'steps' or folder.endswith('/steps'):
            folder = folder[:-len('steps')].rstrip('/')
        return ('%s/%s%s' % (folder, name, ext)) if folder else '%s%s' % (name, ext)
    if playbook.count('.') >= 2:
        namespace = playbook.rsplit('.', 1)[0]
        if namespace.endswith('.steps'):
            namespace = namespace[:-len('.steps')]
        return '%s.%s' % (namespace, name.replace('-', '_').replace('/', '.'))
    return 'playbooks/%s.yml' % name
