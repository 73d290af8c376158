"""The serving_image role's copy helper (roles/serving_image/templates/gb10-image-send.j2), rendered
as the role renders it and run for real on this machine, with `docker` and the cluster ssh client
as stand-ins on PATH: `docker save` writes a known stream and counts its calls, the "ssh" writes
what it receives into a file per peer (or fails for one peer, as a cut link does). The role runs it
between real engines in molecule/serving_image (one target) and in e2e (the first deploy, TP=3);
this covers what needs several targets: one save feeds them all, and one target that fails is
named while the others still get the whole image.
"""
import hashlib
import json
import os
import shlex
import shutil
import stat
import subprocess

import jinja2
import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATE = os.path.join(TOP, 'roles', 'serving_image', 'templates', 'gb10-image-send.j2')
IMAGE_BYTES = 3 * 1024 * 1024 + 17

pytestmark = pytest.mark.skipif(shutil.which('gzip') is None, reason='gzip is not installed')


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def bench(tmp_path):
    """A folder with the rendered helper, a fake docker and a fake cluster ssh client."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    with open(TEMPLATE) as f:
        env = jinja2.Environment()
        env.filters['quote'] = shlex.quote  # Ansible's quote filter
        helper = env.from_string(f.read()).render(ansible_managed='test', serving_image_ssh=str(bin_dir / 'ssh'))
    executable(tmp_path / 'gb10-image-send', helper)
    (tmp_path / 'image.tar').write_bytes(os.urandom(IMAGE_BYTES))
    # docker save <image>: the image's tar, one line per call in saves.log.
    executable(bin_dir / 'docker', '#!/bin/sh\n[ "$1" = save ] || exit 2\necho "$2" >> %s\nexec cat %s\n'
               % (tmp_path / 'saves.log', tmp_path / 'image.tar'))
    # ssh <peer> docker load -q: gunzip what arrives into received/<peer>; peer "down" reads a
    # little, then fails as a link that went away.
    (tmp_path / 'received').mkdir()
    executable(bin_dir / 'ssh', '#!/bin/sh\npeer=$1\n'
               'if [ "$peer" = down ]; then head -c 1000 >/dev/null; echo "connection to down closed" >&2; exit 255; fi\n'
               'gzip -dc > %s/"$peer"\n' % (tmp_path / 'received'))
    return tmp_path


def send(bench, *peers):
    env = dict(os.environ, PATH='%s%s%s' % (bench / 'bin', os.pathsep, os.environ['PATH']))
    proc = subprocess.run(['bash', str(bench / 'gb10-image-send'), 'vllm-node:1', 'gzip'] + list(peers),
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    return proc.returncode, json.loads(proc.stdout)


def digest(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_one_save_feeds_every_peer_the_whole_image(bench):
    rc, report = send(bench, '192.168.100.2', '192.168.100.3')

    assert rc == 0, report
    assert (bench / 'saves.log').read_text().splitlines() == ['vllm-node:1']
    for peer in ('192.168.100.2', '192.168.100.3'):
        assert report['peers'][peer] == {'rc': 0, 'stderr': ''}
        assert digest(bench / 'received' / peer) == digest(bench / 'image.tar')
    # bytes: the compressed stream each peer got (random data does not shrink).
    assert report['bytes'] > IMAGE_BYTES and report['seconds'] > 0 and report['mb_per_s'] > 0


def test_a_peer_that_fails_is_named_and_the_others_get_the_image(bench):
    rc, report = send(bench, '192.168.100.2', 'down', '192.168.100.3')

    assert rc == 1, report
    assert report['peers']['down']['rc'] == 255
    assert 'connection to down closed' in report['peers']['down']['stderr']
    for peer in ('192.168.100.2', '192.168.100.3'):
        assert report['peers'][peer]['rc'] == 0, report
        assert digest(bench / 'received' / peer) == digest(bench / 'image.tar')
    assert (bench / 'saves.log').read_text().splitlines() == ['vllm-node:1']
