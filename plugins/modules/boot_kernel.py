#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: boot_kernel
short_description: Tell which kernel a node boots next and whether the pinned NVIDIA driver's modules are there for it
version_added: "0.1.0"
description:
  - A kernel update whose NVIDIA modules were never built (DKMS without the kernel's headers, a
    module package not installed) brings a node back from its next reboot without a GPU (rule H1,
    rule O4). Roles that reboot a node (C(gb10.serving.leak_recovery),
    C(gb10.serving.modprobe_override)) run this first, through C(gb10.serving.nvidia_driver)'s
    C(boot_check) entry point, and refuse the reboot when C(ok) is false.
  - The next kernel is the one GRUB boots next (C(next_entry) in C(/boot/grub/grubenv) when
    C(grub-reboot) set one, else C(GRUB_DEFAULT) in C(/etc/default/grub), C(saved) through
    grubenv's C(saved_entry); the entry's C(linux) line in C(/boot/grub/grub.cfg)); where grub.cfg
    does not name it, the newest C(/boot/vmlinuz-*), which is what GRUB's default entry boots on
    Ubuntu.
  - The modules are every C(nvidia.ko*) under C(/lib/modules/<kernel>/); each one's version comes
    from C(modinfo -F version), or from the file's own C(.modinfo) strings where modinfo cannot
    read it. The kernel is fine when one of them is of O(branch).
  - Reads only; never reports C(changed).
options:
  root:
    description:
      - The file system root below which C(boot/), C(etc/default/grub) and C(lib/modules/) are
        read. Tests point it at a fixture tree (C(gb10_boot_root)).
    type: path
    default: /
  branch:
    description:
      - The pinned driver branch (C(nvidia_driver_branch)), for example C(580).
    type: str
    required: true
  packaging:
    description:
      - How the node gets its NVIDIA modules, which the fix follows. C(prebuilt) is DGX OS's own way, a
        C(linux-modules-nvidia-<branch>-open-<kernel>) package per kernel; C(dkms) builds them on the node.
      - C(auto) reads it from the files (modules under a kernel's C(updates/dkms/) are DKMS's).
    type: str
    choices: [auto, dkms, prebuilt]
    default: auto
extends_documentation_fragment:
  - gb10.serving.attributes
  - gb10.serving.attributes.read_only
'''

EXAMPLES = r'''
- name: Read which kernel the node boots next and its NVIDIA modules (H1)
  gb10.serving.boot_kernel:
    branch: "580"
  register: boot

- name: Refuse a reboot onto a kernel without them
  ansible.builtin.assert:
    that: boot.ok
    fail_msg: "{{ inventory_hostname }}: {{ boot.problem }}. Fix: {{ boot.fix }}"
'''

RETURN = r'''
kernel:
  description: The kernel version the node boots next, or null when it cannot be told.
  returned: always
  type: str
  sample: 6.17.0-1008-nvidia
how:
  description: How the next kernel was found.
  returned: always
  type: str
  sample: "GRUB's default entry 'Ubuntu' (GRUB_DEFAULT=0)"
running:
  description: The kernel that runs now (C(uname -r)).
  returned: always
  type: str
  sample: 6.11.0-1016-nvidia
packaging:
  description: How the node gets its modules (C(dkms), C(prebuilt)), null where it has none.
  returned: always
  type: str
  sample: prebuilt
branch:
  description: The branch the modules must be of (O(branch)).
  returned: always
  type: str
  sample: "580"
modules:
  description: Every C(nvidia.ko*) under C(/lib/modules/<kernel>/) and its version (null where unreadable).
  returned: always
  type: list
  elements: dict
  sample: [{path: /lib/modules/6.17.0-1008-nvidia/updates/dkms/nvidia.ko.zst, version: 580.142}]
ok:
  description: True when a module of O(branch) is there for the next kernel.
  returned: always
  type: bool
problem:
  description: Why a reboot now would come back without the driver, or null.
  returned: always
  type: str
fix:
  description: What to run before the reboot, or null.
  returned: always
  type: str
  sample: "install that kernel's module package before the reboot: sudo apt-get install linux-modules-nvidia-580-open-6.17.0-1008-nvidia ..."
'''

import platform

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gb10.serving.plugins.module_utils.boot_kernel import inspect


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type='path', default='/'),
            branch=dict(type='str', required=True),
            packaging=dict(type='str', default='auto', choices=['auto', 'dkms', 'prebuilt']),
        ),
        supports_check_mode=True,
    )
    modinfo_bin = module.get_bin_path('modinfo')

    def modinfo(path):
        """modinfo's answer for the file (None: the file's own .modinfo strings are read)."""
        if not modinfo_bin:
            return None
        rc, out, unused_err = module.run_command([modinfo_bin, '-F', 'version', path])
        return out.strip().splitlines()[0] if rc == 0 and out.strip() else None

    packaging = module.params['packaging']
    result = inspect(module.params['root'], module.params['branch'], modinfo, running=platform.release(),
                     packaging=None if packaging == 'auto' else packaging)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
