# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which kernel a node boots next and the NVIDIA modules for it (rule H1)."""

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.boot_kernel import (
    grub_default, menu, modinfo_version, next_kernel, packaging_of, plan, version_key)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H1")

NEW, OLD = '6.17.0-1008-nvidia', '6.11.0-1016-nvidia'
VMLINUZ = ['config-%s' % OLD, 'initrd.img-%s' % NEW, 'vmlinuz-%s' % OLD, 'vmlinuz-%s' % NEW, 'grub']


@pytest.fixture
def grub_cfg(fixture_path):
    with open(fixture_path('boot', 'grub.cfg.dgx-os-two-kernels')) as f:
        return f.read()


def test_kernel_versions_sort_by_their_numbers():
    assert sorted(['6.8.0-60-generic', NEW, OLD, '6.11.0-1009-nvidia'], key=version_key) == \
        ['6.8.0-60-generic', '6.11.0-1009-nvidia', OLD, NEW]


def test_grub_default_reads_the_setting_and_the_saved_entry():
    assert grub_default('') == '0'
    assert grub_default('GRUB_TIMEOUT=5\nGRUB_DEFAULT="1>2"\n') == '1>2'
    assert grub_default("GRUB_DEFAULT=saved\n", 'saved_entry=gnulinux-%s-advanced-x\n' % OLD) == \
        'gnulinux-%s-advanced-x' % OLD
    assert grub_default('GRUB_DEFAULT=saved\n', '# GRUB Environment Block\n') == '0'
    # grub-reboot's one-time choice comes first, whatever GRUB_DEFAULT says.
    assert grub_default('GRUB_DEFAULT=0\n', 'saved_entry=0\nnext_entry=1>2\n') == '1>2'
    assert grub_default('GRUB_DEFAULT=0\n', 'next_entry=\n') == '0'


def test_the_menu_of_a_generated_grub_cfg(grub_cfg):
    items = menu(grub_cfg)
    assert [item['title'] for item in items] == ['DGX OS GNU/Linux', 'Advanced options for DGX OS GNU/Linux',
                                                 'UEFI Firmware Settings']
    assert items[0]['kernel'] == NEW
    assert [entry['kernel'] for entry in items[1]['entries']] == [NEW, NEW, OLD, OLD]
    assert items[2]['kernel'] is None


def test_default_entry_0_boots_the_newest_kernel(grub_cfg):
    kernel, how = next_kernel(grub_cfg, 'GRUB_DEFAULT=0\n', '', VMLINUZ)
    assert kernel == NEW and "GRUB's default entry 'DGX OS GNU/Linux' (GRUB_DEFAULT=0)" == how


def test_a_default_pinned_in_the_submenu_boots_that_kernel(grub_cfg):
    by_index = next_kernel(grub_cfg, 'GRUB_DEFAULT="1>2"\n', '', VMLINUZ)[0]
    by_id = next_kernel(grub_cfg, 'GRUB_DEFAULT=saved\n', 'saved_entry=gnulinux-advanced-6d3f0f52-2c1e-4d43-9d1f-0d6a1c2b8e11'
                        '>gnulinux-%s-advanced-6d3f0f52-2c1e-4d43-9d1f-0d6a1c2b8e11\n' % OLD, VMLINUZ)[0]
    by_title = next_kernel(grub_cfg, "GRUB_DEFAULT='Advanced options for DGX OS GNU/Linux>DGX OS GNU/Linux, with "
                           "Linux %s'\n" % OLD, '', VMLINUZ)[0]
    assert by_index == by_id == by_title == OLD


def test_without_grub_cfg_the_newest_vmlinuz_is_the_next_boot():
    assert next_kernel('', '', '', VMLINUZ) == (NEW, 'the newest kernel in /boot, which GRUB boots by default')
    # A default that grub.cfg does not have falls back the same way.
    assert next_kernel('menuentry "x" {\n}\n', 'GRUB_DEFAULT=7\n', '', VMLINUZ)[0] == NEW


def test_no_kernel_at_all_is_said_so():
    kernel, how = next_kernel('', '', '', ['grub', 'efi'])
    assert kernel is None and 'no /boot/vmlinuz-*' in how
    verdict = plan(kernel, how, [], '580')
    assert not verdict['ok'] and 'cannot tell which kernel the node boots next' in verdict['problem']
    assert 'nvidia_driver_boot_check=false' in verdict['fix']


def test_modinfo_strings_of_an_uncompressed_module():
    data = b'\x7fELF...\x00license=Dual MIT/GPL\x00version=580.142\x00srcversion=ABC\x00'
    assert modinfo_version(data) == '580.142'
    assert modinfo_version(b'\x7fELF no modinfo') is None


def test_a_module_of_the_pinned_branch_makes_the_kernel_fine():
    path = '/lib/modules/%s/updates/dkms/nvidia.ko.zst' % NEW
    verdict = plan(NEW, 'how', [{'path': path, 'version': '580.142'}], '580', running=OLD)
    assert verdict['ok'] and verdict['problem'] is None and verdict['running'] == OLD


def test_a_kernel_without_nvidia_modules_is_refused_with_the_build_command():
    verdict = plan(NEW, 'the newest kernel in /boot', [], '580')
    assert not verdict['ok']
    assert 'the next boot is kernel %s' % NEW in verdict['problem']
    assert 'no nvidia.ko* under /lib/modules/%s' % NEW in verdict['problem'] and 'rule H1' in verdict['problem']
    assert 'sudo apt-get install linux-headers-%s && sudo dkms autoinstall -k %s' % (NEW, NEW) in verdict['fix']


def test_modules_of_another_branch_are_refused_naming_them():
    path = '/lib/modules/%s/updates/dkms/nvidia.ko' % NEW
    verdict = plan(NEW, 'how', [{'path': path, 'version': '590.44.01'}], '580')
    assert not verdict['ok']
    assert '%s (590.44.01), not of the pinned branch 580 (nvidia_driver_branch)' % path in verdict['problem']
    # A branch is the version's first number: 5800.1 is not 580.
    assert not plan(NEW, 'how', [{'path': path, 'version': '5800.1'}], '580')['ok']


@pytest.mark.rule("H1")
def test_on_dgx_os_packaging_the_fix_is_the_next_kernels_module_package():
    # DGX OS ships the modules prebuilt per kernel (linux-modules-nvidia-580-open-<kernel>); DKMS
    # there would build a second, unsigned module.
    verdict = plan(NEW, 'the newest kernel in /boot', [], '580', packaging='prebuilt')
    assert 'sudo apt-get install linux-modules-nvidia-580-open-%s' % NEW in verdict['fix']
    assert 'dkms' not in verdict['fix']
    either = plan(NEW, 'the newest kernel in /boot', [], '580')['fix']
    assert 'linux-modules-nvidia-580-open-%s' % NEW in either and 'dkms autoinstall -k %s' % NEW in either


@pytest.mark.rule("H1")
def test_the_packaging_is_read_from_where_the_running_kernels_module_sits(tmp_path):
    def module(kernel, *where):
        folder = tmp_path.joinpath('lib', 'modules', kernel, *where)
        folder.mkdir(parents=True)
        (folder / 'nvidia.ko').write_bytes(b'\x00version=580.142\x00')

    assert packaging_of(str(tmp_path), OLD) is None
    module(OLD, 'kernel', 'nvidia-580-open')
    assert packaging_of(str(tmp_path), OLD) == 'prebuilt'
    module(NEW, 'updates', 'dkms')
    assert packaging_of(str(tmp_path), NEW) == 'dkms' and packaging_of(str(tmp_path), OLD) == 'prebuilt'
