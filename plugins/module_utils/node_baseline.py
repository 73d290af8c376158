# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node was before the collection first changed it, and how to put it back (playbooks/reset.yml).

The first deploy records, before its first change of a node, every entry under the folders the
collection manages (the one list in roles/cluster/vars/main.yml, which the converged check reads
too), with the packages, their holds and the node's containers and images. A reset restores those
folders as recorded (entries added since removed, entries changed or removed since put back) and
takes off the packages the collection installed since. The plan is pure functions over entry
records; walk() reads a tree into them; the module gb10.serving.node_baseline does the rest of the
reading and the writing.

An entry record: {'type': 'file'|'dir'|'link'|'other', 'mode': int, 'uid': int, 'gid': int} with
'sha256' for a file and 'target' for a link.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import stat


def under(path, roots):
    """Whether path is one of roots or below one."""
    return any(path == root or path.startswith(root.rstrip('/') + '/') for root in roots)


def plan_restore(recorded, current, roots, keep=()):
    """(remove, restore): the current entries under roots that the record lacks, deepest first
    (a folder after what it holds), and the recorded entries that are missing or differ now,
    shallowest first (a folder before what it holds). A folder whose only change is below it is
    not restored itself; a folder that holds a path of keep (the record itself) is never removed."""
    holds_kept = set()
    for path in keep:
        while path not in ('/', ''):
            path = os.path.dirname(path)
            holds_kept.add(path)
    remove = [path for path in current if under(path, roots) and path not in recorded and path not in holds_kept]
    # An entry whose type changed (a file where a folder was) goes first, then comes back.
    remove += [path for path in current if path in recorded and current[path]['type'] != recorded[path]['type']]
    restore = [path for path in recorded if under(path, roots) and current.get(path) != recorded[path]]
    remove.sort(key=lambda path: (-path.count('/'), path))
    restore.sort(key=lambda path: (path.count('/'), path))
    return remove, restore


def packages_to_remove(recorded, current, auto, named):
    """The packages installed since the record that the collection put there: those its roles
    install by name (named) and the dependencies apt installed with them (marked automatic). A
    package the owner installed by hand since (marked manual, not named) stays."""
    added = set(current) - set(recorded)
    return sorted(name for name in added if name in set(named) or name in set(auto))


def holds_to_restore(recorded_holds, current_holds, installed):
    """(hold, release): holds the record had that are gone, and holds added since, of packages
    still installed."""
    recorded_holds, current_holds = set(recorded_holds), set(current_holds)
    return (sorted(name for name in recorded_holds - current_holds if name in installed),
            sorted(name for name in current_holds - recorded_holds if name in installed))


def summary(remove, restore, packages, images):
    """One line for a person: what a reset takes off and puts back on a node."""
    parts = ['%d %s' % (len(items), what) for items, what in (
        (images, 'images removed'), (packages, 'packages purged'), (remove, 'paths removed'),
        (restore, 'paths put back')) if items]
    return ', '.join(parts) if parts else 'nothing to take off: the node is as recorded'


def sha256(path):
    """The hex SHA-256 of a file's content, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def entry(path, lstat, read_link, file_sha256):
    """The entry record of one path from its lstat result (os.lstat), read_link(path) and
    file_sha256(path)."""
    kind = ('dir' if stat.S_ISDIR(lstat.st_mode) else 'link' if stat.S_ISLNK(lstat.st_mode)
            else 'file' if stat.S_ISREG(lstat.st_mode) else 'other')
    record = {'type': kind, 'mode': stat.S_IMODE(lstat.st_mode), 'uid': lstat.st_uid, 'gid': lstat.st_gid}
    if kind == 'file':
        record['sha256'] = file_sha256(path)
    elif kind == 'link':
        record['target'] = read_link(path)
        record['mode'] = 0  # a link's own mode means nothing on Linux
    return record


def walk(roots, exclude, lstat=os.lstat, read_link=os.readlink, file_sha256=sha256, listdir=os.listdir):
    """{path: entry} of every entry under roots (links not followed), but those under exclude."""
    found = {}
    pending = list(roots)
    while pending:
        path = pending.pop()
        if under(path, exclude):
            continue
        try:
            info = lstat(path)
        except OSError:
            continue
        record = entry(path, info, read_link, file_sha256)
        found[path] = record
        if record['type'] == 'dir':
            try:
                pending.extend(os.path.join(path, name) for name in listdir(path))
            except OSError:
                pass
    return found
