"""The serving_image role's copy helper (roles/serving_image/templates/gb10-image-send.j2), rendered
as the role renders it and run for real on this machine, with `docker` and the cluster ssh client
as stand-ins on PATH: `docker save` writes a docker-save tar of a three-layer image (the layout of
Docker before 25, or the OCI layout of Docker 25 and later) and counts its calls, `docker image
inspect` gives the image's layer digests, and the "ssh" writes what its peer receives into a file
(or fails, as a cut link does, or refuses a stream without every layer, as an image store that
wants every blob). The role runs it between real engines in molecule/serving_image (a whole image)
and in e2e (the first deploy: a worker holding an earlier build gets the shims' layers only); this
covers what needs several targets: one save feeds them all, each leaves out what its target holds
, one that fails is named while the others still get the image.
"""
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import tarfile
import types

import jinja2
import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATE = os.path.join(TOP, 'roles', 'serving_image', 'templates', 'gb10-image-send.j2')
# Three layers: a big base, a middle one, and a small last one (as the simulation's shims).
LAYER_BYTES = (3 * 1024 * 1024 + 17, 200 * 1024 + 3, 9 * 1024 + 1)

pytestmark = pytest.mark.skipif(shutil.which('gzip') is None, reason='gzip is not installed')


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def layer_tar(size, seed):
    """A layer as docker save carries it: a tar of one file of random bytes."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode='w', format=tarfile.USTAR_FORMAT) as tar:
        data = os.urandom(size)
        info = tarfile.TarInfo('file-%d' % seed)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def image_tar(layers, oci):
    """A docker-save tar of an image of these layer tars -> (bytes, diff IDs)."""
    diff_ids = ['sha256:' + hashlib.sha256(layer).hexdigest() for layer in layers]
    config = json.dumps({'rootfs': {'type': 'layers', 'diff_ids': diff_ids}}).encode()
    config_digest = hashlib.sha256(config).hexdigest()
    entries = []
    if oci:
        paths = ['blobs/sha256/' + d.split(':')[1] for d in diff_ids]
        entries += [('blobs/sha256/' + config_digest, config)] + list(zip(paths, layers))
        entries += [('index.json', b'{}'), ('oci-layout', b'{"imageLayoutVersion": "1.0.0"}')]
        config_path = 'blobs/sha256/' + config_digest
    else:
        # Layer folders named by v1 IDs, which are not the layers' digests.
        paths = ['%064x/layer.tar' % (i + 7) for i in range(len(layers))]
        config_path = config_digest + '.json'
        entries += [(config_path, config)] + list(zip(paths, layers))
    manifest = json.dumps([{'Config': config_path, 'RepoTags': ['vllm-node:1'], 'Layers': paths}]).encode()
    entries.append(('manifest.json', manifest))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode='w', format=tarfile.USTAR_FORMAT) as tar:
        for name, data in sorted(entries):
            folder = os.path.dirname(name)
            if folder and folder not in tar.getnames():
                info = tarfile.TarInfo(folder)
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue(), diff_ids


@pytest.fixture(params=['legacy', 'oci'])
def bench(request, tmp_path):
    """path: a folder with the rendered helper, a fake docker and a fake cluster ssh client;
    layers and diff_ids: the image's."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    with open(TEMPLATE) as f:
        env = jinja2.Environment()
        env.filters['to_json'] = json.dumps  # Ansible's to_json filter
        helper = env.from_string(f.read()).render(ansible_managed='test', serving_image_ssh=str(bin_dir / 'ssh'))
    executable(tmp_path / 'gb10-image-send', helper)
    layers = [layer_tar(size, i) for i, size in enumerate(LAYER_BYTES)]
    image, diff_ids = image_tar(layers, oci=request.param == 'oci')
    (tmp_path / 'image.tar').write_bytes(image)
    # docker save <image>: the image's tar, one line per call in saves.log; docker image inspect:
    # its layer digests.
    executable(bin_dir / 'docker',
               '#!/bin/sh\ncase "$1" in\n'
               '  save) echo "$2" >> %s; exec cat %s ;;\n'
               '  image) echo \'%s\' ;;\n'
               '  *) exit 2 ;;\nesac\n' % (tmp_path / 'saves.log', tmp_path / 'image.tar', json.dumps(diff_ids)))
    # ssh <peer> docker load -q: gunzip what arrives into received/<peer>[.N] (N: the peer's
    # stream number); peer "down" reads a little, then fails as a link that went away; a peer
    # named "whole-*" refuses a stream without every layer (an image store that wants them all).
    (tmp_path / 'received').mkdir()
    executable(bin_dir / 'ssh', '#!/bin/sh\npeer=$1\nout=%s/"$peer"\n'
               'if [ "$peer" = down ]; then head -c 1000 >/dev/null; echo "connection to down closed" >&2; exit 255; fi\n'
               'n=0; while [ -e "$out.$n" ]; do n=$((n + 1)); done\n'
               'gzip -dc > "$out.$n"\n'
               'count() { tar -tf "$1" | grep -c -e layer.tar -e blobs/sha256/; }\n'
               'case $peer in whole-*) [ "$(count "$out.$n")" -eq "$(count %s)" ] '
               '|| { echo "open layer.tar: no such file or directory" >&2; exit 1; } ;; esac\n'
               % (tmp_path / 'received', tmp_path / 'image.tar'))
    return types.SimpleNamespace(path=tmp_path, layers=layers, diff_ids=diff_ids)


def send(bench, *peers):
    env = dict(os.environ, PATH='%s%s%s' % (bench.path / 'bin', os.pathsep, os.environ['PATH']),
               GB10_IMAGE_SPOOL=str(bench.path))
    # Run as the role runs it: the file itself (sh hands it to python3).
    proc = subprocess.run([str(bench.path / 'gb10-image-send'), 'vllm-node:1', 'gzip'] + list(peers),
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    return proc.returncode, json.loads(proc.stdout)


def members(path):
    """{name: SHA-256 of the data} of a received tar (and it must read to its end)."""
    out = {}
    with tarfile.open(str(path)) as tar:
        for member in tar:
            if member.isfile():
                out[member.name] = hashlib.sha256(tar.extractfile(member).read()).hexdigest()
    return out


def gzip_size(data):
    return len(gzip.compress(data, compresslevel=1))


def test_one_save_feeds_every_peer_the_whole_image(bench):
    rc, report = send(bench, '192.168.100.2', '192.168.100.3')

    assert rc == 0, report
    assert (bench.path / 'saves.log').read_text().splitlines() == ['vllm-node:1']
    whole = members(bench.path / 'image.tar')
    for peer in ('192.168.100.2', '192.168.100.3'):
        assert report['peers'][peer]['rc'] == 0 and report['peers'][peer]['layers_left_out'] == 0, report
        assert members(bench.path / 'received' / (peer + '.0')) == whole
        # The compressed stream this peer got (random data does not shrink).
        assert report['peers'][peer]['bytes'] > sum(LAYER_BYTES)
    assert report['bytes'] == sum(p['bytes'] for p in report['peers'].values())
    assert report['seconds'] > 0 and report['mb_per_s'] > 0


def test_each_peer_gets_only_the_layers_it_lacks(bench):
    # One peer holds the first two layers (an earlier build), one holds nothing.
    rc, report = send(bench, '192.168.100.2=2', '192.168.100.3')

    assert rc == 0, report
    assert (bench.path / 'saves.log').read_text().splitlines() == ['vllm-node:1']
    whole = members(bench.path / 'image.tar')
    held = set(d.split(':')[1] for d in bench.diff_ids[:2])
    delta = members(bench.path / 'received' / '192.168.100.2.0')
    assert delta == dict((n, h) for n, h in whole.items() if h not in held), sorted(delta)
    assert members(bench.path / 'received' / '192.168.100.3.0') == whole
    assert report['peers']['192.168.100.2']['layers_left_out'] == 2
    # The last layer and the metadata: a few KB, against the whole image for the other peer.
    assert gzip_size(bench.layers[2]) < report['peers']['192.168.100.2']['bytes'] < 2 * gzip_size(bench.layers[2]) + 4096
    assert report['peers']['192.168.100.3']['bytes'] > sum(LAYER_BYTES)


def test_a_peer_that_fails_is_named_and_the_others_get_the_image(bench):
    rc, report = send(bench, '192.168.100.2', 'down', '192.168.100.3=1')

    assert rc == 1, report
    assert report['peers']['down']['rc'] == 255
    assert 'connection to down closed' in report['peers']['down']['stderr']
    whole = members(bench.path / 'image.tar')
    assert members(bench.path / 'received' / '192.168.100.2.0') == whole
    assert len(members(bench.path / 'received' / '192.168.100.3.0')) == len(whole) - 1
    for peer in ('192.168.100.2', '192.168.100.3'):
        assert report['peers'][peer]['rc'] == 0, report
    assert (bench.path / 'saves.log').read_text().splitlines() == ['vllm-node:1']


def test_a_peer_that_refuses_a_stream_without_its_layers_gets_the_whole_image(bench):
    # An engine that wants every layer in the stream (the check on the image ID follows in the role).
    rc, report = send(bench, 'whole-1=2')

    assert rc == 0, report
    peer = report['peers']['whole-1']
    assert 'open layer.tar: no such file or directory' in peer['whole_image_after'], peer
    assert members(bench.path / 'received' / 'whole-1.1') == members(bench.path / 'image.tar')
    assert (bench.path / 'saves.log').read_text().splitlines() == ['vllm-node:1', 'vllm-node:1']
