import pytest
import shutil

from ansible_collections.gb10.serving.plugins.modules import drop_page_cache

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H3")


def proc_tree(tmp_path, fixture_path, meminfo='meminfo.gb10-after-load'):
    (tmp_path / 'sys' / 'vm').mkdir(parents=True)
    shutil.copy(fixture_path('proc', meminfo), str(tmp_path / 'meminfo'))
    (tmp_path / 'sys' / 'vm' / 'drop_caches').write_text('')
    return tmp_path


def test_writes_3_and_reports_before_after(run_module, tmp_path, fixture_path):
    root = proc_tree(tmp_path, fixture_path)
    failed, result = run_module(drop_page_cache.main, {'proc_root': str(root)})
    assert not failed
    assert (root / 'sys' / 'vm' / 'drop_caches').read_text() == '3\n'
    assert result['before']['total_gib'] == 119.7
    assert result['changed'] is False  # dropping caches is an action, not a state change
    assert result['freed_gib'] == 0.0  # a fixture file does not shrink


def test_check_mode_writes_nothing(run_module, tmp_path, fixture_path):
    root = proc_tree(tmp_path, fixture_path)
    failed, result = run_module(drop_page_cache.main, {'proc_root': str(root)}, check_mode=True)
    assert not failed
    assert (root / 'sys' / 'vm' / 'drop_caches').read_text() == ''
    assert result['after'] == result['before']


def test_floor_not_met_points_at_recover(run_module, tmp_path, fixture_path):
    root = proc_tree(tmp_path, fixture_path)
    failed, result = run_module(drop_page_cache.main,
                                {'proc_root': str(root), 'min_available_gib': 100})
    assert failed
    assert 'only 11.1 GiB available' in result['msg']
    assert 'recover.yml' in result['msg']


def test_unreadable_meminfo_names_the_file(run_module, tmp_path):
    failed, result = run_module(drop_page_cache.main, {'proc_root': str(tmp_path)})
    assert failed
    assert str(tmp_path / 'meminfo') in result['msg']


def test_malformed_meminfo_is_reported_not_raised(run_module, tmp_path):
    (tmp_path / 'meminfo').write_text('garbage\n')
    failed, result = run_module(drop_page_cache.main, {'proc_root': str(tmp_path)})
    assert failed
    assert 'meminfo line 1' in result['msg']


def test_read_only_proc_sys_says_how_to_fix(run_module, tmp_path, fixture_path):
    root = proc_tree(tmp_path, fixture_path)
    (root / 'sys' / 'vm' / 'drop_caches').unlink()
    (root / 'sys' / 'vm' / 'drop_caches').mkdir()  # cannot be opened for writing
    failed, result = run_module(drop_page_cache.main, {'proc_root': str(root)})
    assert failed
    assert 'become: true' in result['msg']
