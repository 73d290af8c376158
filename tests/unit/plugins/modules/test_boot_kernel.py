# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module boot_kernel on file trees laid out as a node's / (rule H1)."""

import pytest
import shutil

import yaml

from ansible_collections.gb10.serving.plugins.modules import boot_kernel

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H1")

NEW, OLD = '6.17.0-1008-nvidia', '6.11.0-1016-nvidia'


def node_root(tmp_path, fixture_path, kernels_with_modules, kernels=(OLD, NEW)):
    (tmp_path / 'boot' / 'grub').mkdir(parents=True)
    for kernel in kernels:
        (tmp_path / 'boot' / ('vmlinuz-%s' % kernel)).write_text('')
    for kernel in kernels_with_modules:
        folder = tmp_path / 'lib' / 'modules' / kernel / 'updates' / 'dkms'
        folder.mkdir(parents=True)
        (folder / 'nvidia.ko').write_bytes(b'\x7fELF\x00license=NVIDIA\x00version=580.142\x00')
    (tmp_path / 'lib' / 'modules' / NEW / 'kernel').mkdir(parents=True, exist_ok=True)
    shutil.copy(fixture_path('boot', 'grub.cfg.dgx-os-two-kernels'), str(tmp_path / 'boot' / 'grub' / 'grub.cfg'))
    return tmp_path


def test_the_next_kernel_with_its_modules_is_fine(run_module, tmp_path, fixture_path):
    root = node_root(tmp_path, fixture_path, [OLD, NEW])
    failed, result = run_module(boot_kernel.main, {'root': str(root), 'branch': '580'}, check_mode=True)
    assert not failed and result['changed'] is False
    assert result['ok'] and result['kernel'] == NEW
    assert [m['version'] for m in result['modules']] == ['580.142']


def test_an_update_whose_modules_were_never_built_is_not_fine(run_module, tmp_path, fixture_path):
    # The field's case: the OTA's new kernel is GRUB's default, DKMS built nothing for it.
    root = node_root(tmp_path, fixture_path, [OLD])
    failed, result = run_module(boot_kernel.main, {'root': str(root), 'branch': '580'})
    assert not failed  # the module reports; the role refuses the reboot
    assert not result['ok'] and result['kernel'] == NEW and result['modules'] == []
    assert 'dkms autoinstall -k %s' % NEW in result['fix']


def test_grub_pinned_to_the_older_kernel_boots_it(run_module, tmp_path, fixture_path):
    root = node_root(tmp_path, fixture_path, [OLD])
    (root / 'etc' / 'default').mkdir(parents=True)
    (root / 'etc' / 'default' / 'grub').write_text('GRUB_DEFAULT="1>2"\n')
    failed, result = run_module(boot_kernel.main, {'root': str(root), 'branch': '580'})
    assert not failed and result['ok'] and result['kernel'] == OLD


def test_a_root_without_boot_cannot_tell(run_module, tmp_path):
    failed, result = run_module(boot_kernel.main, {'root': str(tmp_path), 'branch': '580'})
    assert not failed and not result['ok'] and result['kernel'] is None


def test_the_doc_blocks_parse_and_every_returned_key_is_documented(run_module, module_doc, tmp_path, fixture_path):
    doc = module_doc(boot_kernel)
    assert doc['module'] == 'boot_kernel' and doc['attributes']['check_mode']['support'] == 'full'
    assert isinstance(yaml.safe_load(boot_kernel.EXAMPLES), list)
    root = node_root(tmp_path, fixture_path, [OLD, NEW])
    result = run_module(boot_kernel.main, {'root': str(root), 'branch': '580'})[1]
    assert set(result) - {'changed', 'invocation'} == set(yaml.safe_load(boot_kernel.RETURN))
