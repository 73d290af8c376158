# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node looked like right after a full deploy converged it, and whether it still does
(a re-run that cannot change anything skips to the smoke test).

A node's state is a dict of sections (boot, files, listings, commands, containers, images,
interfaces), each a dict of key -> short string. The converged stamp keeps the state a full run
left and the key of that run's inputs; the node is current when both are equal now. Pure: the
module reads the node, this file turns raw readings into records and compares them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

SECTIONS = ('boot', 'files', 'listings', 'commands', 'containers', 'images', 'interfaces')
STAMP_VERSION = 1
# How many differences a verdict names; the rest are counted.
NAMED_DIFFERENCES = 8


def digest(data):
    if not isinstance(data, bytes):
        data = data.encode('utf-8')
    return hashlib.sha256(data).hexdigest()


def container_records(inspected):
    """`docker inspect` documents -> {name: record}. A container recreated, restarted by Docker
    (a crash, a reboot), stopped, or given another image or restart policy reads differently."""
    records = {}
    for item in inspected:
        state = item.get('State') or {}
        policy = ((item.get('HostConfig') or {}).get('RestartPolicy') or {}).get('Name', '')
        records[item.get('Name', '').lstrip('/')] = ' '.join([
            item.get('Id', '')[:12], item.get('Image', ''), state.get('Status', ''),
            state.get('StartedAt', ''), policy or 'no'])
    return records


def interface_record(mtu, operstate, addresses):
    """One interface: MTU, operational state and its addresses (`ip -j addr` addr_info), without
    the lifetimes that count down by themselves."""
    addrs = sorted('%s/%s' % (a.get('local', ''), a.get('prefixlen', '')) for a in addresses or [])
    return '%s %s %s' % (mtu, operstate, ','.join(addrs))


def differences(old, new):
    """Keys whose value differs between two states, as 'section key: what' lines, sorted."""
    lines = []
    for section in SECTIONS:
        before = (old or {}).get(section) or {}
        after = (new or {}).get(section) or {}
        for key in sorted(set(before) | set(after)):
            if key not in after:
                lines.append('%s %s: gone' % (section, key))
            elif key not in before:
                lines.append('%s %s: new' % (section, key))
            elif before[key] != after[key]:
                lines.append('%s %s: changed' % (section, key))
    return lines


def verdict(stamp, inputs, state):
    """(current, reasons): whether this node is as the last full run left it, for these inputs.
    reasons name what differs, at most NAMED_DIFFERENCES of them and a count of the rest."""
    if not stamp:
        return False, ['no converged stamp: no full deploy has finished on this node']
    if stamp.get('version') != STAMP_VERSION:
        return False, ['the stamp was written by another version of the collection']
    reasons = []
    if stamp.get('inputs') != inputs:
        reasons.append('the inputs differ (the collection, the profile or a variable)')
    changed = differences(stamp.get('state'), state)
    reasons.extend(changed[:NAMED_DIFFERENCES])
    if len(changed) > NAMED_DIFFERENCES:
        reasons.append('and %d more' % (len(changed) - NAMED_DIFFERENCES))
    return not reasons, reasons


def make_stamp(inputs, state, notes):
    return {'version': STAMP_VERSION, 'inputs': inputs, 'state': state, 'notes': notes or {}}


def dumps(stamp):
    return json.dumps(stamp, indent=1, sort_keys=True) + '\n'
