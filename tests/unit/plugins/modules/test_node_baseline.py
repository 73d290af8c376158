"""gb10.serving.node_baseline: a node recorded before the first deploy comes back as recorded
(playbooks/reset.yml) - files the deploy added gone, files it changed or removed back with their
content, mode and owner, links as they were - and only the packages the collection installed
are named for removal."""
import os

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import node_baseline as logic
from ansible_collections.gb10.serving.plugins.modules import node_baseline

pytestmark = pytest.mark.rule("O7")


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node's folders under tmp_path, its packages and Docker as the test sets them."""
    state = {'packages': {'bash': '5.2', 'nftables': '1.0'}, 'auto': [], 'held': [], 'images': ['sha256:base'],
             'tags': {'vllm-node:latest': 'sha256:base'}}
    monkeypatch.setattr(node_baseline, 'read_packages',
                        lambda module: (dict(state['packages']), list(state['auto']), list(state['held'])))
    monkeypatch.setattr(node_baseline, 'read_docker', lambda module: (list(state['images']), dict(state['tags'])))
    monkeypatch.setattr(node_baseline, 'OWN', (str(tmp_path / 'etc' / 'gb10'),))
    etc = tmp_path / 'etc'
    (etc / 'modprobe.d').mkdir(parents=True)
    (etc / 'modprobe.d' / 'nvidia-modeset.conf').write_text('options nvidia-drm modeset=0\n')
    (etc / 'docker').mkdir()
    (etc / 'docker' / 'daemon.json').write_text('{}\n')
    os.chmod(etc / 'docker' / 'daemon.json', 0o644)
    (etc / 'systemd').mkdir()
    os.symlink('/lib/systemd/system/ssh.service', etc / 'systemd' / 'sshd.service')
    state['tmp'] = tmp_path
    return state


def args(tmp_path, **extra):
    # The record inside a folder the collection makes (as /var/lib/gb10-serving/baseline is).
    base = {'paths': [str(tmp_path / 'etc'), str(tmp_path / 'var' / 'gb10')],
            'exclude': [str(tmp_path / 'etc' / 'known_hosts'), str(tmp_path / 'var' / 'gb10' / 'baseline')],
            'record_dir': str(tmp_path / 'var' / 'gb10' / 'baseline')}
    base.update(extra)
    return base


def deploy(tmp_path):
    """What a deploy does to the folders: adds, changes, removes, re-links, and its own state."""
    etc = tmp_path / 'etc'
    (etc / 'gb10').mkdir()
    (etc / 'gb10' / 'nccl.env').write_text('NCCL_IB_HCA=rocep1s0f1\n')
    (etc / 'docker' / 'daemon.json').write_text('{"live-restore": true}\n')
    os.chmod(etc / 'docker' / 'daemon.json', 0o600)
    (etc / 'modprobe.d' / 'nvidia-modeset.conf').unlink()
    os.unlink(etc / 'systemd' / 'sshd.service')
    os.symlink('/etc/systemd/system/gb10-firewall.service', etc / 'systemd' / 'sshd.service')
    (etc / 'known_hosts').write_text('peer ssh-ed25519 AAAA\n')
    (tmp_path / 'var' / 'gb10' / 'watchdog').mkdir(parents=True)
    (tmp_path / 'var' / 'gb10' / 'watchdog' / 'state.json').write_text('{}')


def snapshot(tmp_path):
    return logic.walk([str(tmp_path / 'etc'), str(tmp_path / 'var' / 'gb10')],
                      [str(tmp_path / 'etc' / 'known_hosts'), str(tmp_path / 'var' / 'gb10' / 'baseline')])


def test_a_node_comes_back_as_it_was_recorded(run_module, node, tmp_path):
    before = snapshot(tmp_path)
    node['held'] = ['nftables']
    failed, recorded = run_module(node_baseline.main, args(tmp_path))
    assert not failed and recorded['changed'] and recorded['prior_deploy'] is False
    deploy(tmp_path)
    node['packages'].update({'nginx': '1.22', 'nginx-common': '1.22', 'htop': '3.2'})
    node['auto'] = ['nginx-common']
    node['held'] = ['bash']  # nftables released by hand, bash held since
    node['images'] = ['sha256:base', 'sha256:serving']
    node['tags'] = {'vllm-node:latest': 'sha256:serving'}  # the copy took the earlier build's name

    failed, plan = run_module(node_baseline.main, args(tmp_path, state='restored', named_packages=['nginx']),
                              check_mode=True)
    assert not failed and plan['changed'] and snapshot(tmp_path) != before  # check mode changes nothing
    failed, result = run_module(node_baseline.main, args(tmp_path, state='restored', named_packages=['nginx']))
    assert not failed and result['changed']
    assert snapshot(tmp_path) == dict(before, **{str(tmp_path / 'var' / 'gb10'): snapshot(tmp_path)[str(tmp_path / 'var' / 'gb10')]})
    assert result['removed'] == plan['removed'] and result['restored'] == plan['restored']
    etc = str(tmp_path / 'etc')
    # Its own folder stays while it holds the record (state=absent removes that last).
    assert set(result['removed']) == {etc + '/gb10/nccl.env', etc + '/gb10', str(tmp_path / 'var' / 'gb10')
                                      + '/watchdog/state.json', str(tmp_path / 'var' / 'gb10') + '/watchdog'}
    assert set(result['restored']) == {etc + '/docker/daemon.json', etc + '/modprobe.d/nvidia-modeset.conf',
                                       etc + '/systemd/sshd.service'}
    # The package installed by hand stays; the collection's and apt's dependency of it go.
    assert result['packages'] == ['nginx', 'nginx-common'] and result['images'] == ['sha256:serving']
    assert result['tags'] == [{'image': 'sha256:base', 'name': 'vllm-node:latest'}]
    assert result['selections'] == [{'name': 'nftables', 'selection': 'hold'}, {'name': 'bash', 'selection': 'install'}]
    assert os.path.exists(tmp_path / 'etc' / 'known_hosts')  # excluded: ssh's own
    # Twice: nothing left to do.
    failed, again = run_module(node_baseline.main, args(tmp_path, state='restored'))
    assert not again['changed'] and again['removed'] == [] and again['restored'] == []


def test_a_socket_that_was_there_is_not_put_back(run_module, node, tmp_path):
    import socket
    path = str(tmp_path / 'etc' / 'docker' / 'control.sock')
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    run_module(node_baseline.main, args(tmp_path))
    listener.close()
    os.unlink(path)
    failed, result = run_module(node_baseline.main, args(tmp_path, state='restored'))
    assert not failed and result['restored'] == [] and not os.path.exists(path)


def test_a_record_is_made_once_and_the_first_one_kept(run_module, node, tmp_path):
    run_module(node_baseline.main, args(tmp_path))
    deploy(tmp_path)
    failed, again = run_module(node_baseline.main, args(tmp_path))
    assert not failed and again['changed'] is False
    _f, result = run_module(node_baseline.main, args(tmp_path, state='restored'))
    assert str(tmp_path / 'etc' / 'gb10') in result['removed']


def test_a_record_made_after_an_earlier_deploy_says_so(run_module, node, tmp_path):
    (tmp_path / 'etc' / 'gb10').mkdir()
    _f, recorded = run_module(node_baseline.main, args(tmp_path))
    assert recorded['prior_deploy'] is True


def test_no_record_means_nothing_to_put_back_and_absent_removes_it(run_module, node, tmp_path):
    failed, result = run_module(node_baseline.main, args(tmp_path, state='restored'))
    assert not failed and not result['changed'] and result['recorded'] == ''
    (tmp_path / 'var' / 'dpkg').mkdir(parents=True)  # the node's own /var/lib, with what it holds
    run_module(node_baseline.main, args(tmp_path))
    _f, gone = run_module(node_baseline.main, args(tmp_path, state='absent'))
    # The folder made to hold it goes too (var/gb10 was not there when the node was recorded);
    # var was, and stays.
    assert gone['changed'] and not os.path.exists(tmp_path / 'var' / 'gb10') and os.path.isdir(tmp_path / 'var')


def test_check_mode_records_nothing(run_module, node, tmp_path):
    failed, result = run_module(node_baseline.main, args(tmp_path), check_mode=True)
    assert not failed and result['changed'] and not os.path.exists(tmp_path / 'var' / 'gb10' / 'baseline')


def test_holds_come_back_and_holds_added_since_are_released():
    assert logic.holds_to_restore(['nvidia-driver-580-open'], ['docker.io'],
                                  {'nvidia-driver-580-open': '1', 'docker.io': '2'}) == (
        ['nvidia-driver-580-open'], ['docker.io'])
    # A package removed since is neither held nor released.
    assert logic.holds_to_restore(['gone'], [], {}) == ([], [])


def test_a_file_where_a_folder_was_goes_and_the_folder_comes_back():
    recorded = {'/etc/x': {'type': 'dir', 'mode': 0o755, 'uid': 0, 'gid': 0},
                '/etc/x/a': {'type': 'file', 'mode': 0o644, 'uid': 0, 'gid': 0, 'sha256': '1'}}
    current = {'/etc/x': {'type': 'file', 'mode': 0o644, 'uid': 0, 'gid': 0, 'sha256': '2'},
               '/etc/y': {'type': 'file', 'mode': 0o644, 'uid': 0, 'gid': 0, 'sha256': '3'}}
    remove, restore = logic.plan_restore(recorded, current, ['/etc'])
    assert remove == ['/etc/x', '/etc/y'] and restore == ['/etc/x', '/etc/x/a']


def test_the_summary_names_what_went_and_what_came_back():
    assert logic.summary(['/etc/gb10'], [], ['nginx', 'nginx-common'], ['sha256:x']) == (
        '1 images removed, 2 packages purged, 1 paths removed')
    assert logic.summary([], [], [], []) == 'nothing to take off: the node is as recorded'
