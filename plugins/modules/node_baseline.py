#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: node_baseline
short_description: Record what a node was before the collection changed it, and put it back
version_added: "0.2.0"
description:
  - C(state=recorded) records, once, every entry (content, mode, owner, link target) under
    I(paths) in an archive, with the installed packages (and which apt installed as a
    dependency), the package holds, and the node's images and their names. A record that exists is
    kept, so the first deploy's record is the node as it came.
  - C(state=restored) puts I(paths) back as recorded - entries added since are removed, entries
    changed or removed since come back from the archive - and returns what the playbook takes off
    besides files (packages installed since, holds, images that came since and names to give back).
  - C(state=absent) removes the record (the last step of a reset).
  - Package removal, Docker objects and services are the playbook's (playbooks/reset.yml), with the
    well-kept modules; this module moves files only.
author:
  - gb10.serving developers (@gb10-serving)
options:
  state:
    description: C(recorded), C(restored) or C(absent).
    type: str
    choices: [recorded, restored, absent]
    default: recorded
  paths:
    description:
      - Folders and files to record (with I(state=recorded)). A path that does not exist is
        recorded as absent, and removed by the restore.
    type: list
    elements: path
    default: []
  exclude:
    description: Paths under I(paths) that change by themselves (ssh's known_hosts) and are neither recorded nor restored.
    type: list
    elements: path
    default: []
  named_packages:
    description: The packages the collection's roles install by name (with I(state=restored)).
    type: list
    elements: str
    default: []
  record_dir:
    description: Where the record lives on the node.
    type: path
    default: /var/lib/gb10-serving/baseline
attributes:
  check_mode:
    description: Says what it would record, or remove and put back, and changes nothing.
    support: full
  diff_mode:
    description: The paths removed and put back.
    support: full
notes:
  - Owners count as changes since the record, so a file the collection made root-owned comes back
    with its recorded owner.
'''

EXAMPLES = r'''
- name: Record the node before the deploy's first change
  gb10.serving.node_baseline:
    state: recorded
    paths: [/etc/docker, /etc/netplan, /etc/gb10]
    exclude: [/root/.ssh/known_hosts]

- name: Put the node back
  gb10.serving.node_baseline:
    state: restored
    named_packages: [nginx, earlyoom]
  register: reset_files
'''

RETURN = r'''
recorded:
  description: When the record was made (UTC, ISO 8601), or empty when there is none.
  returned: always
  type: str
prior_deploy:
  description: Whether the record was made on a node an earlier release had already deployed to (its own folders existed).
  returned: always
  type: bool
removed:
  description: Paths added since the record, removed (or to be removed, in check mode).
  returned: state=restored
  type: list
  elements: str
restored:
  description: Paths changed or removed since the record, put back (or to be).
  returned: state=restored
  type: list
  elements: str
packages:
  description: Packages installed since the record that the collection put there (named, or apt's dependencies of them), for the playbook to remove.
  returned: state=restored
  type: list
  elements: str
selections:
  description:
    - dpkg selections that put the holds back as recorded, C(name) and C(selection) each - C(hold) for a
      package held at the record and no longer, C(install) for one held since.
  returned: state=restored
  type: list
  elements: dict
images:
  description: Image IDs present now that the record does not have.
  returned: state=restored
  type: list
  elements: str
tags:
  description:
    - Image names the record had that now point elsewhere or nowhere, with the recorded image
      (C(image), C(name)), to tag again once I(images) are gone.
  returned: state=restored
  type: list
  elements: dict
summary:
  description: One line of what the reset takes off and puts back.
  returned: state=restored
  type: str
'''

import datetime
import json
import os
import shutil
import tarfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils.node_baseline import (
    holds_to_restore, packages_to_remove, plan_restore, summary, walk)

# The collection's own folder: a record made where it exists is a record of a node an earlier
# release deployed to.
OWN = ('/etc/gb10',)
# tarfile's extraction filters (Python 3.12, and the security releases of 3.8 to 3.11) where there.
TRUSTED = {'filter': 'fully_trusted'} if hasattr(tarfile, 'fully_trusted_filter') else {}


def read_packages(module):
    """({name: version} of installed packages, [automatic], [held])."""
    rc, out, err = module.run_command(['dpkg-query', '-W', '-f', '${Package}\t${Version}\t${db:Status-Abbrev}\n'])
    if rc != 0:
        module.fail_json(msg='dpkg-query failed: %s' % err.strip())
    installed = {}
    held = []
    for line in out.splitlines():
        name, version, status = (line.split('\t') + ['', ''])[:3]
        if status[1:2] == 'i':
            installed[name] = version
        if status[:1] == 'h':
            held.append(name)
    auto = []
    apt_mark = module.get_bin_path('apt-mark')
    if apt_mark:
        rc, out, _err = module.run_command([apt_mark, 'showauto'])
        auto = out.split() if rc == 0 else []
    return installed, sorted(auto), sorted(held)


def read_docker(module):
    """(image IDs, {repository:tag: image ID}); empty where Docker is absent or not answering."""
    docker = module.get_bin_path('docker')
    if not docker:
        return [], {}
    rc, out, _err = module.run_command([docker, 'images', '--no-trunc', '--format', '{{.ID}} {{.Repository}}:{{.Tag}}'])
    ids, tags = set(), {}
    for line in out.splitlines() if rc == 0 else []:
        image, tag = line.split(' ', 1)
        ids.add(image)
        if not tag.endswith('<none>'):
            tags[tag] = image
    return sorted(ids), tags


def record(module, params):
    record_dir = params['record_dir']
    paths = [os.path.normpath(path) for path in params['paths']]
    entries = walk(paths, params['exclude'])
    installed, auto, held = read_packages(module)
    images, tags = read_docker(module)
    document = {
        'recorded': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
        'prior_deploy': any(os.path.exists(path) for path in OWN),
        'paths': paths, 'exclude': params['exclude'], 'entries': entries,
        'packages': installed, 'auto': auto, 'held': held, 'images': images, 'tags': tags,
    }
    if module.check_mode:
        return document
    partial = record_dir + '.partial'
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial, mode=0o700)
    with tarfile.open(os.path.join(partial, 'files.tar'), 'w') as archive:
        for path in sorted(entries):
            if entries[path]['type'] != 'other':
                archive.add(path, recursive=False)
    with open(os.path.join(partial, 'record.json'), 'w') as handle:
        json.dump(document, handle, indent=1, sort_keys=True)
    os.makedirs(os.path.dirname(record_dir), exist_ok=True)
    os.rename(partial, record_dir)
    return document


def remove_path(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def restore(module, params, document):
    entries = document['entries']
    current = walk(document['paths'], document['exclude'])
    remove, back = plan_restore(entries, current, document['paths'], keep=document['exclude'])
    # A socket or a pipe is not archived (a program makes it when it starts): nothing to put back.
    back = [path for path in back if entries[path]['type'] != 'other']
    installed, auto, held = read_packages(module)
    packages = packages_to_remove(document['packages'], installed, auto, params['named_packages'])
    hold, release = holds_to_restore(document['held'], held, installed)
    images, tags = read_docker(module)
    images = sorted(set(images) - set(document['images']))
    # The recorded names of images the node still has, where a name now points elsewhere (the
    # serving image's tag moved to the copy the deploy brought): given back after that copy goes.
    retag = [{'image': image, 'name': tag} for tag, image in sorted(document.get('tags', {}).items())
             if tags.get(tag) != image and image not in images]
    if not module.check_mode and (remove or back):
        with tarfile.open(os.path.join(params['record_dir'], 'files.tar')) as archive:
            members = dict(('/' + member.name.lstrip('/'), member) for member in archive.getmembers())
            for path in remove:
                remove_path(path)
            for path in back:
                if os.path.lexists(path) and entries[path]['type'] != 'dir':
                    remove_path(path)
                # numeric_owner: the IDs as recorded, not names looked up again. The archive is this
                # module's own, root's alone: extracted as written (Python 3.14 would otherwise apply
                # its 'data' filter, which refuses absolute links such as /etc's).
                archive.extract(members[path], path='/', set_attrs=True, numeric_owner=True, **TRUSTED)
    selections = ([{'name': name, 'selection': 'hold'} for name in hold]
                  + [{'name': name, 'selection': 'install'} for name in release])
    return {'removed': remove, 'restored': back, 'packages': packages, 'selections': selections,
            'images': images, 'tags': retag, 'summary': summary(remove, back, packages, images),
            'changed': bool(remove or back)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['recorded', 'restored', 'absent'], default='recorded'),
            paths=dict(type='list', elements='path', default=[]),
            exclude=dict(type='list', elements='path', default=[]),
            named_packages=dict(type='list', elements='str', default=[]),
            record_dir=dict(type='path', default='/var/lib/gb10-serving/baseline'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    path = os.path.join(params['record_dir'], 'record.json')
    document = None
    if os.path.exists(path):
        with open(path) as handle:
            document = json.load(handle)
    if params['state'] == 'recorded':
        if document:
            module.exit_json(changed=False, recorded=document['recorded'], prior_deploy=document['prior_deploy'])
        if not params['paths']:
            module.fail_json(msg='paths is required to record a node')
        document = record(module, params)
        module.exit_json(changed=True, recorded=document['recorded'], prior_deploy=document['prior_deploy'],
                         diff={'before': '', 'after': 'record of %d entries under %s\n'
                               % (len(document['entries']), ', '.join(document['paths']))})
    if params['state'] == 'absent':
        if document and not module.check_mode:
            shutil.rmtree(params['record_dir'])
            # The folders made to hold the record go with it, up to the first the node had or
            # that holds anything else.
            parent = os.path.dirname(params['record_dir'])
            while parent not in ('/', '') and parent not in document['entries'] and not os.listdir(parent):
                os.rmdir(parent)
                parent = os.path.dirname(parent)
        module.exit_json(changed=bool(document), recorded=(document or {}).get('recorded', ''),
                         prior_deploy=bool((document or {}).get('prior_deploy')))
    if not document:
        module.exit_json(changed=False, recorded='', prior_deploy=False, removed=[], restored=[], packages=[],
                         selections=[], images=[], tags=[], summary='no record: nothing of this node to put back')
    result = restore(module, params, document)
    result['diff'] = {'before': ''.join('%s\n' % p for p in sorted(result['removed'] + result['restored'])),
                      'after': ''.join('%s\n' % p for p in sorted(result['restored']))}
    module.exit_json(recorded=document['recorded'], prior_deploy=document['prior_deploy'], **result)


if __name__ == '__main__':
    main()
