# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's leak reboot (roles/leak_recovery/files/gb10_leak_reboot.py, rules H4 and H1), run for
real as the cluster SSH gate's `reboot-if-leaked` runs it: on a node laid out in a scratch folder
(its meminfo, nvidia-smi and boot files), with a reboot command that leaves a mark. It reboots on
its own reading only, and never onto a kernel without the NVIDIA modules. The watchdog that asks
for it runs on the simulated cluster (tests/e2e/test_4b_watchdog.py)."""

import pytest
import json
import os
import subprocess
import sys
import time

from ansible_collections.gb10.serving.plugins.module_utils import unified_memory

from plugins.modules.test_boot_kernel import NEW, OLD, node_root
from plugins.module_utils.test_node_metrics import LEAKED_MEMINFO

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O4")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAM = os.path.join(TOP, 'roles', 'leak_recovery', 'files', 'gb10_leak_reboot.py')
# Where the collection's module_utils import from (the role copies them beside the program).
COLLECTIONS = os.path.abspath(os.path.join(os.path.dirname(unified_memory.__file__), *[os.pardir] * 5))
HEAD_ADDRESS = '192.168.100.10'  # the head's address on the node's link (gb10_head_link_address)
HEALTHY_MEMINFO = LEAKED_MEMINFO.replace('MemFree: 85000000 kB', 'MemFree: 119000000 kB').replace(
    'MemAvailable: 86000000 kB', 'MemAvailable: 120000000 kB')


def node(tmp_path, fixture_path, meminfo, kernels_with_modules):
    """A node's files and the program's configuration (role leak_recovery's leak-reboot.json)."""
    root = node_root(tmp_path / 'root', fixture_path, kernels_with_modules)
    (tmp_path / 'proc').mkdir()
    (tmp_path / 'proc' / 'meminfo').write_text(meminfo)
    smi = tmp_path / 'nvidia-smi'
    answers = (fixture_path('nvidia-smi', 'gb10-580.142.query-gpu.csv'),
               fixture_path('nvidia-smi', 'gb10-580.142.query-compute-apps.idle.csv'))
    smi.write_text('#!/bin/sh\ncase "$1" in\n  --query-gpu=*) cat %s ;;\n  --query-compute-apps=*) cat %s ;;\n'
                   '  *) exit 9 ;;\nesac\n' % answers)
    smi.chmod(0o755)
    config = {'proc_root': str(tmp_path / 'proc'), 'nvidia_smi': str(smi), 'gpu_source': 'nvidia_smi',
              'cuda_probe': 'none', 'leak_threshold_gib': 10.0, 'baseline_file': str(tmp_path / 'baseline.json'),
              'boot_root': str(root), 'boot_check': True,
              'reboot_command': 'touch %s' % (tmp_path / 'rebooted'),
              'reboot_min_interval_s': 3600, 'reboot_log': str(tmp_path / 'memory' / 'leak-reboots.json'),
              'head_address': HEAD_ADDRESS}
    (tmp_path / 'config.json').write_text(json.dumps(config))
    return tmp_path


def leak_reboot(scratch, ssh_connection=None):
    env = dict(os.environ, PYTHONPATH=COLLECTIONS)
    env.pop('SSH_CONNECTION', None)
    if ssh_connection:
        env['SSH_CONNECTION'] = ssh_connection
    proc = subprocess.run([sys.executable, PROGRAM, str(scratch / 'config.json')], capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rebooted(scratch, within):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if (scratch / 'rebooted').exists():
            return True
        time.sleep(0.2)
    return False


def test_a_leaked_node_whose_next_kernel_has_the_driver_reboots_after_answering(tmp_path, fixture_path):
    scratch = node(tmp_path, fixture_path, LEAKED_MEMINFO, [OLD, NEW])
    found = leak_reboot(scratch)
    assert found['leaked'] and found['rebooting'] and found['next_kernel'] == NEW, found
    assert found['unaccounted_gib'] > found['threshold_gib'] == 10.0
    assert rebooted(scratch, 15)


@pytest.mark.rule("H1")
def test_a_leaked_node_is_not_rebooted_onto_a_kernel_without_the_driver(tmp_path, fixture_path):
    # The kernel update DKMS built nothing for is GRUB's default: the node would lose its GPU (H1).
    scratch = node(tmp_path, fixture_path, LEAKED_MEMINFO, [OLD])
    found = leak_reboot(scratch)
    assert found['leaked'] and not found['rebooting'], found
    assert found['refused'].startswith('not rebooted: the next boot is kernel %s' % NEW), found
    assert 'dkms autoinstall -k %s' % NEW in found['refused']
    assert not rebooted(scratch, 4)


def test_a_node_whose_own_reading_finds_no_leak_is_not_rebooted(tmp_path, fixture_path):
    # Whoever asks, the node decides on its own reading (H4).
    scratch = node(tmp_path, fixture_path, HEALTHY_MEMINFO, [OLD, NEW])
    found = leak_reboot(scratch)
    assert found['leaked'] is False and not found['rebooting'] and 'refused' not in found, found
    assert not rebooted(scratch, 4)


@pytest.mark.rule("O4")
def test_a_peer_gets_a_leak_reboot_at_most_once_an_hour_and_every_ask_is_logged(tmp_path, fixture_path):
    # A peer on the cluster link that makes or fakes leaks cannot keep the node rebooting (O4): a
    # peer's second ask within the hour is refused, and both are logged.
    scratch = node(tmp_path, fixture_path, LEAKED_MEMINFO, [OLD, NEW])
    first = leak_reboot(scratch, '192.168.100.13 50022 192.168.100.11 22')
    assert first['rebooting'] and first['asked_by'] == '192.168.100.13', first
    assert rebooted(scratch, 15)
    (scratch / 'rebooted').unlink()
    second = leak_reboot(scratch, '192.168.100.12 40100 192.168.100.11 22')
    assert second['leaked'] and not second['rebooting'], second
    assert 'reboots for one at most once per 3600 s (reboot_min_interval_s) when a peer other than the head asks' in second['refused'], second
    assert 'playbooks/recover.yml' in second['refused']
    assert not rebooted(scratch, 4)
    log = json.loads((scratch / 'memory' / 'leak-reboots.json').read_text())['requests']
    assert [(r['asked_by'], r['rebooting']) for r in log] == [('192.168.100.13', True), ('192.168.100.12', False)]
    # An hour later a peer may have it reboot for a leak again.
    for entry in log:
        entry['at'] -= 3600
    (scratch / 'memory' / 'leak-reboots.json').write_text(json.dumps({'requests': log}))
    third = leak_reboot(scratch, '192.168.100.12 40100 192.168.100.11 22')
    assert third['rebooting'], third
    assert rebooted(scratch, 15)


@pytest.mark.rule("O4", "H4")
def test_a_genuine_second_leak_within_the_hour_is_rebooted_when_the_head_asks(tmp_path, fixture_path):
    # The field's case: a worker's container killed hard 26 minutes after an earlier leak reboot. The
    # head's watchdog asks (its verdict, bounded by its restart budget), the node's own reading says
    # leaked: it reboots, not stays down. So does a run on the node itself.
    scratch = node(tmp_path, fixture_path, LEAKED_MEMINFO, [OLD, NEW])
    assert leak_reboot(scratch, '192.168.100.13 50022 192.168.100.11 22')['rebooting']
    assert rebooted(scratch, 15)
    (scratch / 'rebooted').unlink()
    log = json.loads((scratch / 'memory' / 'leak-reboots.json').read_text())['requests']
    log[0]['at'] -= 26 * 60
    (scratch / 'memory' / 'leak-reboots.json').write_text(json.dumps({'requests': log}))
    again = leak_reboot(scratch, '%s 50100 192.168.100.11 22' % HEAD_ADDRESS)
    assert again['rebooting'] and again['asked_by'] == HEAD_ADDRESS, again
    assert rebooted(scratch, 15)
    (scratch / 'rebooted').unlink()
    assert leak_reboot(scratch)['rebooting']  # on the node itself
    assert rebooted(scratch, 15)


def test_asks_that_find_no_leak_are_logged_and_never_spend_the_bound(tmp_path, fixture_path):
    scratch = node(tmp_path, fixture_path, HEALTHY_MEMINFO, [OLD, NEW])
    for unused in range(3):
        assert not leak_reboot(scratch, '10.0.0.9 1 10.0.0.1 22')['rebooting']
    log = json.loads((scratch / 'memory' / 'leak-reboots.json').read_text())['requests']
    assert len(log) == 3 and not any(r['rebooting'] for r in log)
    (scratch / 'proc' / 'meminfo').write_text(LEAKED_MEMINFO)
    assert leak_reboot(scratch)['rebooting']
