# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The servers of nginx's whole configuration as `nginx -T` prints it, and the ports they listen on
(rule A1: only the gateway's server may listen on the gateway's port, since any other server there
answers clients without the key; `nginx -t` passes such a configuration). Pure; no I/O.

nginx -T prints every file it reads, each after a line "# configuration file PATH:". A server block
is a `server { ... }` wherever it stands (an upstream's `server host:port;` is a directive, not a
block); a server without a `listen` listens on port 80 (nginx's ngx_http_core_module: "listen
*:80 | *:8000", 8000 only without root).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

FILE_MARK = re.compile(r'^# configuration file (.+):\s*$')
DEFAULT_PORT = 80


def _tokens(dump):
    """(token, file, line) of every word, quoted string, '{', '}' and ';' in the dump, comments
    left out; line counts within each file."""
    current, line_number = '', 0
    for text in (dump or '').splitlines():
        mark = FILE_MARK.match(text)
        if mark:
            current, line_number = mark.group(1), 0
            continue
        line_number += 1
        word, index = '', 0
        while index < len(text):
            char = text[index]
            if char in '"\'':
                end = index + 1
                while end < len(text) and text[end] != char:
                    end += 2 if text[end] == '\\' else 1
                word += text[index + 1:end]
                index = end + 1
                continue
            if char == '#' and not word:
                break
            if char.isspace() or char in '{};':
                if word:
                    yield word, current, line_number
                    word = ''
                if char in '{};':
                    yield char, current, line_number
            else:
                word += char
            index += 1
        if word:
            yield word, current, line_number


def servers(dump):
    """[{'file', 'line', 'listen': [[args], ...]}] of every server block, in order."""
    found, stack, directive = [], [], []
    for token, path, line in _tokens(dump):
        if token == '{':
            stack.append({'name': directive[0] if directive else '', 'file': path, 'line': line, 'listen': []})
            directive = []
        elif token == ';':
            if directive and directive[0] == 'listen' and stack and stack[-1]['name'] == 'server':
                stack[-1]['listen'].append(directive[1:])
            directive = []
        elif token == '}':
            directive = []
            if not stack:
                continue
            block = stack.pop()
            # nginx -T prints an included file apart, after the file that includes it: a site's
            # server is then at the top of its own file. A server block is legal only where it
            # serves (http, stream, mail, or a file included there), so every one counts.
            if block['name'] == 'server':
                found.append({'file': block['file'], 'line': block['line'], 'listen': block['listen']})
        else:
            directive.append(token)
    return found


def listen_port(args):
    """The port of one listen directive's arguments: '8443', '*:8443', '[::]:8443 ssl',
    '127.0.0.1:8443', 'localhost' (80); None for a Unix socket."""
    if not args:
        return None
    address = args[0]
    if address.startswith('unix:'):
        return None
    if address.startswith('['):
        rest = address.partition(']')[2]
        return int(rest[1:]) if rest.startswith(':') and rest[1:].isdigit() else DEFAULT_PORT
    if address.isdigit():
        return int(address)
    host, colon, port = address.rpartition(':')
    if colon and port.isdigit():
        return int(port)
    return DEFAULT_PORT


def servers_on(dump, port):
    """'FILE:LINE' of every server block that listens on port (a server without listen: port 80)."""
    port = int(port)
    out = []
    for server in servers(dump):
        ports = [listen_port(args) for args in server['listen']] or [DEFAULT_PORT]
        if port in ports:
            out.append('%s:%d' % (server['file'], server['line']))
    return out
