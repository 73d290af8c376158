import pytest
import json

from ansible_collections.gb10.serving.plugins.modules import converged_state

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O2")


def args(tmp_path, **extra):
    base = {'inputs': 'key-1', 'stamp_path': str(tmp_path / 'stamp' / 'converged.json'),
            'files': [str(tmp_path / 'etc')], 'listings': [str(tmp_path / 'model')],
            'docker': False, 'boot_id_command': 'cat %s' % (tmp_path / 'boot_id')}
    base.update(extra)
    return base


def node(tmp_path):
    (tmp_path / 'etc' / 'gb10').mkdir(parents=True)
    (tmp_path / 'etc' / 'gb10' / 'nccl.env').write_text('NCCL_IB_HCA=rocep1s0f1\n')
    (tmp_path / 'model').mkdir()
    (tmp_path / 'model' / 'model.safetensors').write_text('weights')
    (tmp_path / 'boot_id').write_text('boot-1\n')


def test_a_node_without_a_stamp_is_not_current(run_module, tmp_path):
    node(tmp_path)
    failed, result = run_module(converged_state.main, args(tmp_path))
    assert not failed and result['current'] is False and result['changed'] is False
    assert result['reasons'] == ['no converged stamp: no full deploy has finished on this node']


def test_a_stamped_node_reads_current_until_a_file_changes(run_module, tmp_path):
    node(tmp_path)
    failed, stamped = run_module(converged_state.main, args(tmp_path, state='stamp', notes={'a': 'b'}))
    assert not failed and stamped['changed'] is True
    failed, result = run_module(converged_state.main, args(tmp_path))
    assert result['current'] is True and result['notes'] == {'a': 'b'} and result['entries'] >= 4
    (tmp_path / 'etc' / 'gb10' / 'nccl.env').write_text('NCCL_IB_HCA=other\n')
    failed, result = run_module(converged_state.main, args(tmp_path))
    assert result['current'] is False
    assert result['reasons'] == ['files %s: changed' % (tmp_path / 'etc' / 'gb10' / 'nccl.env')]


def test_a_reboot_other_inputs_or_a_model_file_make_a_full_run(run_module, tmp_path):
    node(tmp_path)
    run_module(converged_state.main, args(tmp_path, state='stamp'))
    _f, result = run_module(converged_state.main, args(tmp_path, inputs='key-2'))
    assert result['reasons'] == ['the inputs differ (the collection, the profile or a variable)']
    (tmp_path / 'model' / 'model.safetensors').write_text('other weights')
    (tmp_path / 'boot_id').write_text('boot-2\n')
    _f, result = run_module(converged_state.main, args(tmp_path))
    assert result['reasons'] == ['boot boot_id: changed', 'listings %s: changed' % (tmp_path / 'model')]


def test_excluded_paths_do_not_count(run_module, tmp_path):
    node(tmp_path)
    report = tmp_path / 'etc' / 'gb10' / 'report.json'
    run_module(converged_state.main, args(tmp_path, state='stamp', exclude=[str(report)]))
    report.write_text('{}')
    _f, result = run_module(converged_state.main, args(tmp_path, exclude=[str(report)]))
    assert result['current'] is True


def test_stamping_again_the_same_state_changes_nothing_and_check_mode_writes_nothing(run_module, tmp_path):
    node(tmp_path)
    _f, first = run_module(converged_state.main, args(tmp_path, state='stamp'), check_mode=True)
    assert first['changed'] is True and not (tmp_path / 'stamp' / 'converged.json').exists()
    run_module(converged_state.main, args(tmp_path, state='stamp'))
    _f, again = run_module(converged_state.main, args(tmp_path, state='stamp'))
    assert again['changed'] is False
    assert json.loads((tmp_path / 'stamp' / 'converged.json').read_text())['inputs'] == 'key-1'


def test_clear_removes_the_stamp(run_module, tmp_path):
    node(tmp_path)
    run_module(converged_state.main, args(tmp_path, state='stamp'))
    _f, cleared = run_module(converged_state.main, {'state': 'clear', 'stamp_path': str(tmp_path / 'stamp' / 'converged.json')})
    assert cleared['changed'] is True and not (tmp_path / 'stamp' / 'converged.json').exists()
    _f, again = run_module(converged_state.main, {'state': 'clear', 'stamp_path': str(tmp_path / 'stamp' / 'converged.json')})
    assert again['changed'] is False


def test_a_command_that_is_not_installed_counts_as_absent(run_module, tmp_path):
    node(tmp_path)
    _f, result = run_module(converged_state.main, args(tmp_path, state='stamp', commands=['no-such-command -S']))
    stamp = json.loads((tmp_path / 'stamp' / 'converged.json').read_text())
    assert stamp['state']['commands'] == {'no-such-command -S': 'absent'}
