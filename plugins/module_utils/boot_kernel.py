# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which kernel a node boots next, and whether the pinned NVIDIA driver's modules are there for
it (rule H1): a kernel update whose NVIDIA modules were never built (DKMS without the
kernel's headers, a module package not installed) brings the node back from its next reboot
without a GPU. Parsing and planning, and inspect(), the reading of a node's boot files that module
boot_kernel and role node_metrics' leak reboot (gb10_leak_reboot.py) share."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

VMLINUZ = re.compile(r'^vmlinuz-(.+)$')
# A menuentry or submenu line of grub.cfg: its title, and its id when it gives one ($menuentry_id_option).
ENTRY = re.compile(r"""^\s*(menuentry|submenu)\s+(?:'([^']*)'|"([^"]*)"|(\S+))(.*)$""")
ENTRY_ID = re.compile(r"""\$menuentry_id_option\s+'([^']*)'""")
LINUX = re.compile(r'^\s*linux\S*\s+\S*vmlinuz-(\S+)')
# The strings of a module's .modinfo section, as modinfo reads them: "version=580.142\0".
MODINFO_VERSION = re.compile(br'(?:^|\x00)version=([0-9][0-9A-Za-z.+~-]*)\x00')


def version_key(version):
    """A sort key for kernel versions ('6.17.0-1008-nvidia' after '6.11.0-1016-nvidia' and
    '6.8.0-60-generic'): numbers compare as numbers, the rest as text."""
    return [(0, int(part), '') if part.isdigit() else (1, 0, part)
            for part in re.split(r'(\d+)', version) if part]


def _grubenv(grubenv, key):
    for line in (grubenv or '').splitlines():
        if line.startswith(key + '='):
            return line.split('=', 1)[1].strip()
    return ''


def grub_default(default_grub, grubenv=''):
    """The entry GRUB boots next: grubenv's next_entry when set (grub-reboot, a one-time choice
    that grub.cfg's header takes first), else GRUB_DEFAULT from /etc/default/grub ('0' when unset),
    'saved' resolving to grubenv's saved_entry ('0' when none was saved)."""
    if _grubenv(grubenv, 'next_entry'):
        return _grubenv(grubenv, 'next_entry')
    value = '0'
    for line in (default_grub or '').splitlines():
        match = re.match(r'''^\s*GRUB_DEFAULT=(?:"([^"]*)"|'([^']*)'|(\S*))''', line)
        if match:
            value = next(group for group in match.groups() if group is not None)
    if value == 'saved':
        value = _grubenv(grubenv, 'saved_entry') or '0'
    return value


def menu(grub_cfg):
    """The menu of a grub.cfg: a list of entries {title, id, kernel} and submenus {title, id,
    entries}, in order."""
    root = []
    stack = [root]
    current = None
    for line in (grub_cfg or '').splitlines():
        match = ENTRY.match(line)
        if match:
            kind, title = match.group(1), next(g for g in match.group(2, 3, 4) if g is not None)
            ident = ENTRY_ID.search(match.group(5) or '')
            item = {'title': title, 'id': ident.group(1) if ident else title}
            if kind == 'submenu':
                item['entries'] = []
                stack[-1].append(item)
                stack.append(item['entries'])
                current = None
            else:
                item['kernel'] = None
                stack[-1].append(item)
                current = item
            continue
        linux = LINUX.match(line)
        if linux and current is not None and current['kernel'] is None:
            current['kernel'] = linux.group(1)
            continue
        if line.strip() == '}':
            if current is not None:
                current = None
            elif len(stack) > 1:
                stack.pop()
    return root


def _select(items, selector):
    """The entry a GRUB_DEFAULT path selects ('0', '1>2', 'Ubuntu', 'gnulinux-advanced-x>gnulinux-6.8...')."""
    parts = selector.split('>')
    for depth, part in enumerate(parts):
        if part.isdigit():
            index = int(part)
            found = items[index] if index < len(items) else None
        else:
            found = next((item for item in items if part in (item['id'], item['title'])), None)
        if found is None:
            return None
        if depth < len(parts) - 1:
            items = found.get('entries') or []
            continue
        if 'entries' in found:  # a submenu selected alone boots its first entry
            return found['entries'][0] if found['entries'] else None
        return found
    return None


def next_kernel(grub_cfg, default_grub, grubenv, vmlinuz_names):
    """(kernel version the node boots next, how that was found) or (None, why not).

    From grub.cfg's default entry (GRUB_DEFAULT, 'saved' through grubenv) where grub.cfg names
    it; else the newest /boot/vmlinuz-*, which is what GRUB's default entry 0 boots on Ubuntu."""
    installed = [m.group(1) for m in (VMLINUZ.match(name) for name in vmlinuz_names or []) if m]
    if grub_cfg:
        selector = grub_default(default_grub, grubenv)
        entry = _select(menu(grub_cfg), selector)
        if entry and entry.get('kernel'):
            return entry['kernel'], "GRUB's default entry %r (GRUB_DEFAULT=%s)" % (entry['title'], selector)
    if installed:
        newest = max(installed, key=version_key)
        return newest, 'the newest kernel in /boot, which GRUB boots by default'
    return None, 'no /boot/vmlinuz-* and no kernel in grub.cfg'


def modinfo_version(data):
    """The version= string of a module file's .modinfo section (uncompressed .ko), or None."""
    match = MODINFO_VERSION.search(data or b'')
    return match.group(1).decode('ascii') if match else None


PACKAGINGS = ('dkms', 'prebuilt')
# DGX OS ships the driver's kernel modules prebuilt, one package per kernel, which an OTA installs
# with its kernel; DKMS builds them on the node into updates/dkms/ (the alternative).
PREBUILT_PACKAGE = 'linux-modules-nvidia-%s-open-%s'


def module_fix(packaging, branch, kernel):
    """How the next kernel gets the pinned driver's modules, on the node's packaging."""
    prebuilt = ('install that kernel\'s module package before the reboot: sudo apt-get install %s (DGX OS ships '
                'the modules prebuilt per kernel)' % (PREBUILT_PACKAGE % (branch, kernel)))
    dkms = ('build them before the reboot: sudo apt-get install linux-headers-%s && sudo dkms autoinstall -k %s '
            '(DKMS)' % (kernel, kernel))
    if packaging == 'prebuilt':
        return prebuilt + ', then run the playbook again'
    if packaging == 'dkms':
        return dkms + ', then run the playbook again'
    return '%s; or, where the modules come from DKMS, %s; then run the playbook again' % (prebuilt, dkms)


def plan(kernel, how, modules, branch, running=None, packaging=None):
    """The verdict for a reboot: {kernel, how, running, modules, packaging, ok, problem, fix}.

    modules: [{path, version}] of every nvidia.ko* under /lib/modules/<kernel>. ok when one of
    them is of the pinned branch (its version starts with '<branch>.'). packaging: how the node
    gets its modules (PACKAGINGS), which the fix follows; None names both ways."""
    out = {'kernel': kernel, 'how': how, 'running': running, 'modules': modules, 'branch': branch,
           'packaging': packaging, 'ok': False, 'problem': None, 'fix': None}
    if kernel is None:
        out['problem'] = ('cannot tell which kernel the node boots next (%s), so a reboot could come back '
                          'without the NVIDIA driver (rule H1)' % how)
        out['fix'] = ('check /boot and /boot/grub/grub.cfg on the node; where the boot loader is not GRUB, '
                      'set nvidia_driver_boot_check=false for this run and check the kernel by hand')
        return out
    versions = [m.get('version') for m in modules]
    if any(v and v.split('.')[0] == str(branch) for v in versions):
        out['ok'] = True
        return out
    fix = module_fix(packaging, branch, kernel)
    if not modules:
        out['problem'] = ('the next boot is kernel %s (%s), which has no NVIDIA kernel module (no nvidia.ko* '
                          'under /lib/modules/%s): the node would come back without its GPU (rule H1)'
                          % (kernel, how, kernel))
    else:
        found = ', '.join('%s (%s)' % (m['path'], m.get('version') or 'no version') for m in modules)
        out['problem'] = ('the next boot is kernel %s (%s), whose NVIDIA module is %s, not of the pinned branch '
                          '%s (nvidia_driver_branch): the node would come back on another driver or none (rule H1)'
                          % (kernel, how, found, branch))
    out['fix'] = fix
    return out


def _read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ''


def _file_version(path):
    try:
        with open(path, 'rb') as handle:
            return modinfo_version(handle.read())
    except (IOError, OSError):
        return None


def packaging_of(root, running=None):
    """How the node's NVIDIA modules got there, read from the files: 'dkms' when they sit under a
    kernel's updates/dkms/ (where DKMS installs them), 'prebuilt' when they sit elsewhere (a module
    package's place), the running kernel's first; None when the node has none."""
    found = glob.glob(os.path.join(root, 'lib', 'modules', '*', '**', 'nvidia.ko*'), recursive=True)
    if not found:
        return None
    mine = [path for path in found if running and os.sep + running + os.sep in path] or found
    return 'dkms' if any(os.sep + os.path.join('updates', 'dkms') + os.sep in path for path in mine) else 'prebuilt'


def inspect(root, branch, modinfo=None, running=None, packaging=None):
    """plan() for the node whose file system is at root: the kernel GRUB boots next and the
    nvidia.ko* under its /lib/modules. modinfo(path) gives a module's version (modinfo -F version)
    or None, in which case the file's own .modinfo strings are read (an uncompressed .ko).
    packaging: the node's (PACKAGINGS), None reads it from the files (packaging_of)."""
    boot = os.path.join(root, 'boot')
    names = sorted(os.listdir(boot)) if os.path.isdir(boot) else []
    kernel, how = next_kernel(_read_text(os.path.join(boot, 'grub', 'grub.cfg')),
                              _read_text(os.path.join(root, 'etc', 'default', 'grub')),
                              _read_text(os.path.join(boot, 'grub', 'grubenv')), names)
    modules = []
    if kernel:
        found = glob.glob(os.path.join(root, 'lib', 'modules', kernel, '**', 'nvidia.ko*'), recursive=True)
        modules = [{'path': path, 'version': (modinfo(path) if modinfo else None) or _file_version(path)}
                   for path in sorted(found)]
    return plan(kernel, how, modules, branch, running=running, packaging=packaging or packaging_of(root, running))
