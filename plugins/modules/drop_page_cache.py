#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: drop_page_cache
short_description: Drop the Linux page cache on a GB10 node and report the memory it freed
version_added: "0.1.0"
description:
  - On GB10 the GPU and the CPU share one memory pool. Model weights read by a previous process
    stay in the page cache, and vLLM then sees only 8-11 GiB free and refuses to start (rule H3).
  - This module runs C(sync), writes C(3) to C(<proc_root>/sys/vm/drop_caches) and reports
    available memory and page cache before and after, in GiB.
  - Dropping caches changes no configuration that a later run could find different, so the module
    never reports C(changed) (rule O2; a second deploy reports changed=0).
options:
  proc_root:
    description:
      - Root of the proc filesystem. Tests point it at a fixture tree.
    type: path
    default: /proc
  min_available_gib:
    description:
      - Fail when less than this much memory is available after dropping caches.
      - C(0) disables the check. Leaked unified memory (rule H4) is the usual cause of a failure.
    type: float
    default: 0
notes:
  - In check mode nothing is dropped; the figures are read and C(freed_gib) is C(0).
attributes:
  check_mode:
    support: full
    description: Reads and reports the figures; nothing is dropped.
  diff_mode:
    support: none
    description: Dropping caches changes no file or setting that a diff could show.
extends_documentation_fragment:
  - gb10.serving.attributes
'''

EXAMPLES = r'''
- name: Drop the page cache before launch (H3)
  gb10.serving.drop_page_cache:
    min_available_gib: 100
  register: gb10_cache

- name: Show what it freed
  ansible.builtin.debug:
    msg: "freed {{ gb10_cache.freed_gib }} GiB, {{ gb10_cache.after.available_gib }} GiB available"
'''

RETURN = r'''
before:
  description: Memory figures before dropping caches, in GiB.
  returned: always
  type: dict
  contains:
    total_gib:
      description: MemTotal.
      type: float
    available_gib:
      description: MemAvailable.
      type: float
    free_gib:
      description: MemFree.
      type: float
    page_cache_gib:
      description: Cached plus Buffers.
      type: float
  sample: {total_gib: 119.7, available_gib: 104.1, free_gib: 60.2, page_cache_gib: 44.0}
after:
  description: The same figures after dropping caches (equal to C(before) in check mode).
  returned: always
  type: dict
  sample: {total_gib: 119.7, available_gib: 114.3, free_gib: 113.9, page_cache_gib: 0.4}
freed_gib:
  description: Page cache released, C(before.page_cache_gib - after.page_cache_gib), never below 0.
  returned: always
  type: float
  sample: 43.6
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gb10.serving.plugins.module_utils.meminfo import read_meminfo, summarize


def read_summary(module, proc_root):
    return summarize(read_meminfo(module, proc_root))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            proc_root=dict(type='path', default='/proc'),
            min_available_gib=dict(type='float', default=0),
        ),
        supports_check_mode=True,
    )
    proc_root = module.params['proc_root']
    before = read_summary(module, proc_root)
    after = before
    if not module.check_mode:
        control = os.path.join(proc_root, 'sys', 'vm', 'drop_caches')
        os.sync()
        try:
            with open(control, 'w') as handle:
                handle.write('3\n')
        except (IOError, OSError) as exc:
            module.fail_json(msg='cannot write %s: %s. Run as root on the host (become: true); '
                                 'in a container /proc/sys must be writable.' % (control, exc),
                             before=before)
        after = read_summary(module, proc_root)
    freed = round(max(before['page_cache_gib'] - after['page_cache_gib'], 0.0), 2)
    result = dict(changed=False, before=before, after=after, freed_gib=freed)
    floor = module.params['min_available_gib']
    if floor and after['available_gib'] < floor and not module.check_mode:
        module.fail_json(
            msg='only %.1f GiB available after dropping caches, %.1f GiB needed. Memory held '
                'outside the page cache is likely leaked unified memory (rule H4): run '
                'playbooks/recover.yml for this host.' % (after['available_gib'], floor),
            **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
