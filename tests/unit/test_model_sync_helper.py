"""The model_sync role's helper script (roles/model_sync/files/gb10-model-sync.sh), run for real
on this machine: a manifest of a model with many files, and pulls from a read-only rsync daemon on
loopback, as the role runs them node to node (M3). The role itself is tested on two hosts by
molecule/model_sync and in the e2e interrupted-copy test; this covers what needs many files and
repeated runs to show: the manifest's lines, the verify that runs while rsync transfers, and the
repair of a file that rsync's quick check keeps.
"""
import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import time

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELPER = os.path.join(TOP, 'roles', 'model_sync', 'files', 'gb10-model-sync.sh')
STREAMS = 4

pytestmark = [pytest.mark.rule("M3"),
              pytest.mark.skipif(shutil.which('rsync') is None, reason='rsync is not installed (scripts/host-deps.sh installs it)')]


def helper(*args):
    """Run the helper; return its exit status and the JSON object it prints."""
    proc = subprocess.run(['bash', HELPER] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=120, check=False)
    return proc.returncode, json.loads(proc.stdout)


def sums(root):
    """{relative path: sha256} of every file under root, the helper's own state files left out."""
    found = {}
    for dirpath, unused_dirs, files in os.walk(root):
        for name in files:
            if name.startswith('.gb10-'):
                continue
            path = os.path.join(dirpath, name)
            with open(path, 'rb') as f:
                found[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return found


@pytest.fixture(scope='module')
def model(tmp_path_factory):
    """A model-shaped directory with many files: shards in folders, a name with a space."""
    root = tmp_path_factory.mktemp('source') / 'tiny-moe'
    rng = random.Random(7)
    for i in range(1, 61):
        path = root / ('experts-%d' % (i % 3)) / ('model-%05d-of-00060.safetensors' % i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(rng.randint(1, 300) * 1024))
    (root / 'config.json').write_text('{"architectures": ["MiniMaxM2ForCausalLM"]}\n')
    (root / 'chat template.jinja').write_text('{{ messages }}\n')
    return root


@pytest.fixture(scope='module')
def manifest(model, tmp_path_factory):
    state = tmp_path_factory.mktemp('source-state') / 'tiny-moe'
    rc, out = helper('manifest', model, state, STREAMS)
    assert rc == 0, out
    return state, out


@pytest.fixture(scope='module')
def daemon(model, tmp_path_factory):
    """rsync://127.0.0.1:<free port>/model, read-only, as the role's rsyncd.conf serves it."""
    run = tmp_path_factory.mktemp('rsyncd')
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    (run / 'rsyncd.conf').write_text(
        'port = %d\naddress = 127.0.0.1\nuse chroot = no\nuid = %d\ngid = %d\n'
        '[model]\npath = %s\nread only = yes\nlist = no\nexclude = .gb10-*\n'
        % (port, os.getuid(), os.getgid(), model))
    proc = subprocess.Popen(['rsync', '--daemon', '--no-detach', '--config=%s' % (run / 'rsyncd.conf')])
    try:
        for unused_try in range(100):  # bounded: 10 s
            with socket.socket() as s:
                if s.connect_ex(('127.0.0.1', port)) == 0:
                    break
            time.sleep(0.1)
        else:
            pytest.fail('rsync daemon did not listen on 127.0.0.1:%d within 10 s' % port)
        yield 'rsync://127.0.0.1:%d/model' % port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_manifest_lists_every_file_once_with_its_sha256(model, manifest, tmp_path):
    state, out = manifest
    want = sums(model)
    assert out['files'] == len(want) == 62
    assert out['bytes'] == sum(p.stat().st_size for p in model.rglob('*') if p.is_file())
    # Computed three more times from scratch: hashing processes that shared one pipe used to
    # interleave their lines now and then, so one clean manifest proves little.
    for attempt in range(3):
        fresh = tmp_path / ('state-%d' % attempt)
        rc, again = helper('manifest', model, fresh, STREAMS)
        assert rc == 0, again
        lines = open(str(fresh) + '.sha256').read().splitlines()
        assert len(lines) == len(want)
        listed = dict((line[68:], line[:64]) for line in lines if line[64:68] == '  ./')
        assert listed == want
        assert again['digest'] == out['digest']


def copy_word(state):
    """The textfile the node's exporter serves for the watchdog: what it says of the copy."""
    with open('%s.prom' % state) as f:
        return f.read()


def test_a_pull_copies_the_model_and_marks_it_verified(manifest, daemon, tmp_path, model):
    state, out = manifest
    dest = tmp_path / 'tiny-moe'
    rc, pulled = helper('pull', dest, state, STREAMS, daemon, out['bytes'])
    assert rc == 0, pulled
    assert pulled['repaired'] == 0
    assert sums(dest) == sums(model)
    assert helper('check', dest, state) == (0, {'complete': True})
    assert copy_word(state) == 'gb10_model_copy_verified{path="%s"} 1\n' % dest


def test_a_pull_repairs_a_truncated_file_and_one_with_same_size_and_mtime(manifest, daemon, tmp_path, model):
    state, out = manifest
    dest = tmp_path / 'tiny-moe'
    assert helper('pull', dest, state, STREAMS, daemon, out['bytes'])[0] == 0
    truncated = dest / 'experts-1' / 'model-00001-of-00060.safetensors'
    with open(truncated, 'r+b') as f:
        f.truncate(100)
    corrupt = dest / 'experts-2' / 'model-00002-of-00060.safetensors'
    stat = corrupt.stat()
    with open(corrupt, 'r+b') as f:
        f.seek(10)
        f.write(b'XXXX')
    os.utime(corrupt, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert helper('check', dest, state) == (0, {'complete': False})
    assert copy_word(state).endswith('} 0\n')  # the watchdog relaunches nothing onto it

    rc, pulled = helper('pull', dest, state, STREAMS, daemon, out['bytes'])
    assert rc == 0, pulled
    # rsync resends the truncated file (its size differs); only the same-size file that rsync
    # kept has to be caught by the checksum and fetched again.
    assert pulled['repaired'] == 1
    assert sums(dest) == sums(model)
    assert helper('check', dest, state) == (0, {'complete': True})


def test_a_pull_from_a_source_that_is_gone_fails_and_keeps_the_files(manifest, daemon, tmp_path, model):
    state, out = manifest
    dest = tmp_path / 'tiny-moe'
    assert helper('pull', dest, state, STREAMS, daemon, out['bytes'])[0] == 0
    (dest / 'config.json').unlink()
    with socket.socket() as s:  # a port where nothing listens
        s.bind(('127.0.0.1', 0))
        gone = 'rsync://127.0.0.1:%d/model' % s.getsockname()[1]

    rc, pulled = helper('pull', dest, state, STREAMS, gone, out['bytes'])
    assert rc == 1
    assert pulled == {'failed': True, 'msg': 'rsync failed, see stderr'}
    # Nothing that was copied is deleted, and the copy is not marked complete.
    assert len(sums(dest)) == len(sums(model)) - 1
    assert copy_word(state).endswith('} 0\n')
    assert helper('check', dest, state) == (0, {'complete': False})
