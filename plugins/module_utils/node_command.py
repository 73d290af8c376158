# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A bounded command runner for the collection's programs that run on a node outside Ansible
(node_metrics' exporter, leak_recovery's leak reboot): the `run(argv)` that
unified_memory.measure() and boot_kernel take. Modules use AnsibleModule.run_command instead."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import subprocess

# A reader that hangs (nvidia-smi, the CUDA probe, modinfo) must not hang the program that asked.
TIMEOUT_S = 30


def run(argv, timeout_s=TIMEOUT_S):
    """(rc, stdout, stderr) of argv; 124 and a message when it gave no answer within timeout_s."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return 124, '', '%s gave no answer in %d s' % (argv[0], timeout_s)
    return done.returncode, done.stdout, done.stderr
