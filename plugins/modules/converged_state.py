#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: converged_state
short_description: Read whether a node is still as the last full deploy left it, or stamp it so
version_added: "0.9.0"
description:
  - A re-run of the deploy on a cluster that serves the wanted launch and that nothing touched
    since cannot change anything, yet every role's tasks would read the node again. This
    module reads, in one pass, what the roles manage on a node (the content of their files, the
    installed packages, the link's interfaces, the containers and images, the firewall's chain,
    the boot) and compares it with the stamp the last full run wrote, with the key of that run's
    inputs.
  - C(state=read) answers C(current) and, when not, C(reasons) that name what differs.
    C(state=stamp) reads the node the same way and writes the stamp.
  - The stamp keeps a record per file (content checksum, mode, owner), not the files.
options:
  state:
    description:
      - C(read) compares; C(stamp) writes the stamp from what it reads now; C(clear) removes it (a
        full run does, first, so that only a run that ends well leaves one).
    type: str
    choices: [read, stamp, clear]
    default: read
  inputs:
    description:
      - The key of the run's inputs (the collection's content, the profile, the variables), from
        the C(gb10.serving.converge_inputs) lookup. A stamp of other inputs is not current.
      - Required with C(state=read) and C(state=stamp).
    type: str
  stamp_path:
    description: Where the stamp lives on the node.
    type: path
    default: /var/lib/gb10/converged.json
  files:
    description:
      - Files and folders whose content, mode and owner count (folders are walked; symbolic links
        count by their target). A path that does not exist counts as absent.
    type: list
    elements: path
    default: []
  exclude:
    description: Paths under I(files) that change by themselves (reports, caches) and do not count.
    type: list
    elements: path
    default: []
  listings:
    description:
      - Folders whose file names, sizes and modification times count, not their content (the model
        weights, which would take minutes to read).
    type: list
    elements: path
    default: []
  commands:
    description:
      - Commands whose output counts (for example the firewall chain as C(iptables -S)). A command
        that is not installed counts as absent; its exit status counts.
    type: list
    elements: str
    default: []
  docker:
    description: Whether every container (name, ID, image, status, start time, restart policy) and
      every image ID count. A node without Docker counts as such.
    type: bool
    default: true
  interfaces:
    description:
      - Network interfaces whose MTU, state and addresses count (the cluster link's ports), besides
        every interface that is not virtual (not under C(/sys/devices/virtual/net)), which always
        counts (a Spark's CX7 ports and management port).
    type: list
    elements: str
    default: []
  boot_id_command:
    description:
      - Command whose output identifies the boot; empty reads C(/proc/sys/kernel/random/boot_id).
        A reboot makes a node not current (what a boot resets, the roles set again).
    type: str
    default: ''
  notes:
    description: With C(state=stamp), short facts of the full run that a run which skips it reports
      again (for example where the metrics are).
    type: dict
    default: {}
notes:
  - The stamp is only ever a reason to skip work; a missing, unreadable or foreign stamp means a
    full run. Removing it forces the next deploy to run every step.
attributes:
  check_mode:
    support: full
    description: C(read) reads in check mode too; C(stamp) reports what it would write and writes nothing.
  diff_mode:
    support: full
    description: C(stamp) shows what differs from the stamp there, a line per file, container or interface.
extends_documentation_fragment:
  - gb10.serving.attributes
'''

EXAMPLES = r'''
- name: Is this node still as the last full run left it?
  gb10.serving.converged_state:
    inputs: "{{ lookup('gb10.serving.converge_inputs') }}"
    files: [/etc/gb10, /etc/docker, /var/lib/dpkg/status]
    commands: [nft list table inet gb10_serving]
    interfaces: [enp1s0f1np1, enP2p1s0f1np1]
  register: gb10_converged

- name: Stamp the node after a full run
  gb10.serving.converged_state:
    state: stamp
    inputs: "{{ gb10_converge_inputs }}"
    files: [/etc/gb10, /etc/docker, /var/lib/dpkg/status]
    commands: [nft list table inet gb10_serving]
    interfaces: [enp1s0f1np1, enP2p1s0f1np1]
'''

RETURN = r'''
current:
  description: Whether the stamp there has these inputs and the state read now (C(state=read)).
  returned: always
  type: bool
  sample: false
reasons:
  description: What differs, a line each (empty when current).
  returned: always
  type: list
  elements: str
  sample: ["files /etc/gb10/nccl.env: changed", "containers gb10-ray-worker: gone"]
notes:
  description: The notes the stamp there keeps (empty without one).
  returned: always
  type: dict
  sample: {node_metrics_summary: "http://10.0.0.11:9100/metrics"}
entries:
  description: How many records the node's state has (files, containers, interfaces...).
  returned: always
  type: int
  sample: 214
'''

import json
import os
import shlex
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text
from ansible_collections.gb10.serving.plugins.module_utils.converged import (
    container_records, differences, digest, dumps, interface_record, make_stamp, verdict)

# Files larger than this count by size and modification time (an image tarball left in a folder).
HASH_LIMIT = 64 * 1024 * 1024


def excluded(path, exclude):
    return any(path == e or path.startswith(e.rstrip('/') + '/') for e in exclude)


def file_record(path):
    info = os.lstat(path)
    owner = '%d:%d %o' % (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode))
    if stat.S_ISLNK(info.st_mode):
        return 'link ' + os.readlink(path)
    if stat.S_ISDIR(info.st_mode):
        return 'dir ' + owner
    if not stat.S_ISREG(info.st_mode):
        return 'special ' + owner
    if info.st_size > HASH_LIMIT:
        return 'large %d %d %s' % (info.st_size, int(info.st_mtime), owner)
    with open(path, 'rb') as handle:
        sha = digest(handle.read())
    return '%s %s' % (sha, owner)


def read_files(paths, exclude):
    records = {}
    for top in paths:
        if excluded(top, exclude):
            continue
        if not os.path.lexists(top):
            records[top] = 'absent'
            continue
        records[top] = file_record(top)
        if os.path.isdir(top) and not os.path.islink(top):
            for folder, dirs, names in os.walk(top):
                dirs[:] = sorted(d for d in dirs if not excluded(os.path.join(folder, d), exclude))
                for name in sorted(dirs + names):
                    path = os.path.join(folder, name)
                    if not excluded(path, exclude):
                        records[path] = file_record(path)
    return records


def read_listings(paths):
    records = {}
    for top in paths:
        if not os.path.isdir(top):
            records[top] = 'absent'
            continue
        entries = []
        for folder, dirs, names in os.walk(top):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(folder, name)
                info = os.lstat(path)
                entries.append('%s %d %d' % (os.path.relpath(path, top), info.st_size, int(info.st_mtime)))
        records[top] = '%d files %s' % (len(entries), digest('\n'.join(entries)))
    return records


def read_command(module, command):
    argv = shlex.split(command)
    if not argv or not module.get_bin_path(argv[0]) and not os.path.isfile(argv[0]):
        return 'absent'
    rc, out, _err = module.run_command(argv)
    return 'rc=%d %s' % (rc, digest(out))


def read_docker(module):
    docker = module.get_bin_path('docker')
    if not docker:
        return {'docker': 'absent'}, {}
    rc, out, err = module.run_command([docker, 'ps', '-aq', '--no-trunc'])
    if rc != 0:
        # A Docker that does not answer is a state a full run must look at.
        return {'docker': 'not answering: ' + digest(err)}, {}
    ids = out.split()
    containers = {}
    if ids:
        rc, out, err = module.run_command([docker, 'inspect'] + ids)
        # A container removed between the two calls makes inspect fail: read as changed.
        containers = container_records(json.loads(out)) if rc == 0 else {'docker': 'changing'}
    rc, out, _err = module.run_command([docker, 'images', '-q', '--no-trunc'])
    images = dict((image, 'present') for image in sorted(set(out.split()))) if rc == 0 else {'docker': 'not answering'}
    return containers, images


def physical_interfaces(root='/sys/class/net'):
    names = os.listdir(root) if os.path.isdir(root) else []
    return [n for n in names if not os.path.realpath(os.path.join(root, n)).startswith('/sys/devices/virtual/')]


def read_interfaces(module, names):
    records = {}
    ip = module.get_bin_path('ip')
    for name in sorted(set(names) | set(physical_interfaces())):
        base = os.path.join('/sys/class/net', name)
        if not os.path.isdir(base):
            records[name] = 'absent'
            continue
        with open(os.path.join(base, 'mtu')) as handle:
            mtu = handle.read().strip()
        with open(os.path.join(base, 'operstate')) as handle:
            operstate = handle.read().strip()
        addresses = []
        if ip:
            rc, out, _err = module.run_command([ip, '-j', 'addr', 'show', 'dev', name])
            if rc == 0 and out.strip():
                addresses = [a for entry in json.loads(out) for a in entry.get('addr_info', [])]
        records[name] = interface_record(mtu, operstate, addresses)
    return records


def read_boot(module, command):
    if command:
        rc, out, err = module.run_command(command, use_unsafe_shell=True)
        if rc != 0:
            module.fail_json(msg='boot_id_command %r failed (rc %d): %s' % (command, rc, err.strip()))
        return {'boot_id': out.strip()}
    with open('/proc/sys/kernel/random/boot_id') as handle:
        return {'boot_id': handle.read().strip()}


def read_state(module):
    params = module.params
    containers, images = read_docker(module) if params['docker'] else ({}, {})
    state = {
        'boot': read_boot(module, params['boot_id_command']),
        'files': read_files(params['files'], params['exclude']),
        'listings': read_listings(params['listings']),
        'commands': dict((command, read_command(module, command)) for command in params['commands']),
        'containers': containers,
        'images': images,
        'interfaces': read_interfaces(module, params['interfaces']),
    }
    return state


def read_stamp(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def write_stamp(module, path, text):
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    handle, tmp = tempfile.mkstemp(dir=folder, prefix='.converged.')
    with os.fdopen(handle, 'w') as out:
        out.write(text)
    os.chmod(tmp, 0o644)
    module.atomic_move(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['read', 'stamp', 'clear'], default='read'),
            inputs=dict(type='str', no_log=True),
            stamp_path=dict(type='path', default='/var/lib/gb10/converged.json'),
            files=dict(type='list', elements='path', default=[]),
            exclude=dict(type='list', elements='path', default=[]),
            listings=dict(type='list', elements='path', default=[]),
            commands=dict(type='list', elements='str', default=[]),
            docker=dict(type='bool', default=True),
            interfaces=dict(type='list', elements='str', default=[]),
            boot_id_command=dict(type='str', default=''),
            notes=dict(type='dict', default={}),
        ),
        required_if=[('state', 'read', ['inputs']), ('state', 'stamp', ['inputs'])],
        supports_check_mode=True,
    )
    params = module.params
    if params['state'] == 'clear':
        present = os.path.lexists(params['stamp_path'])
        if present and not module.check_mode:
            os.unlink(params['stamp_path'])
        module.exit_json(changed=present, current=False, reasons=[], notes={}, entries=0)
    stamp = read_stamp(params['stamp_path'])
    state = read_state(module)
    entries = sum(len(section) for section in state.values())
    notes = (stamp or {}).get('notes') or {}
    if params['state'] == 'read':
        current, reasons = verdict(stamp, params['inputs'], state)
        module.exit_json(changed=False, current=current, reasons=reasons, notes=notes, entries=entries)

    new = make_stamp(params['inputs'], state, params['notes'])
    changed = stamp != json.loads(dumps(new))
    result = dict(changed=changed, current=True, reasons=[], notes=params['notes'], entries=entries)
    if module._diff and changed:
        before = differences((stamp or {}).get('state'), state)
        result['diff'] = dict(before_header=params['stamp_path'], after_header=params['stamp_path'],
                              before='\n'.join(before) + '\n' if stamp else '',
                              after='stamp of %d records, inputs %s\n' % (entries, to_text(params['inputs'])[:12]))
    if changed and not module.check_mode:
        write_stamp(module, params['stamp_path'], dumps(new))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
