# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What model_sync's pull costs on one machine with cores to spare: its helper
(roles/model_sync/files/gb10-model-sync.sh) pulls a model from a read-only rsync daemon on
127.0.0.1, against the two things it is made of, each measured alone in the same run:

  rsync xN    N rsyncs from the daemon, each on its share of the files (the pull's transfer)
  SHA-256 xN  every copied file hashed by N processes, as the pull's verify does (no copy)
  pull xN     the helper's pull: transfer, each file checked as soon as its stream has it

On a 2-core machine (copy-throughput's two light hosts) sender, receiver and hashing share two
cores, so any overlap is lost to the CPU; this benchmark shows the pull against transfer and hash
where they do not compete for cores: pull ~ max(transfer, hash) means the verify overlaps, pull
~ transfer + hash means it does not. Needs only bash, rsync and python3 (no Docker, no Ansible).
Talks to 127.0.0.1 only. Each figure is the best of --repeat tries."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELPER = os.path.join(TOP, 'roles', 'model_sync', 'files', 'gb10-model-sync.sh')
GIB = 1024 ** 3
MIB = 1024 ** 2
# The SHA-256 that the helper computes (python3 hashlib) over the files it is given.
HASH_PY = '''
import hashlib, sys
for path in sys.argv[1:]:
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 22), b''):
            h.update(block)
'''


def make_model(root, gib, file_mib):
    """Model-like files of random data (a 64 MiB random block, each copy made unique)."""
    os.makedirs(root)
    block = os.urandom(64 * MIB)
    files = int(gib * GIB // (file_mib * MIB))
    for i in range(files):
        with open(os.path.join(root, 'model-%05d-of-%05d.safetensors' % (i + 1, files)), 'wb') as f:
            for j in range(file_mib // 64):
                f.write(('%08d%08d' % (i, j)).encode() + block[16:])
    return files, files * file_mib * MIB


def timed(*argv, **kwargs):
    start = time.monotonic()
    subprocess.run(list(argv), check=True, **kwargs)
    return time.monotonic() - start


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def run(gib=8, file_mib=512, streams=(4, 8), repeat=2):
    work = tempfile.mkdtemp(prefix='gb10-copy-local-')
    try:
        src, dst, state = (os.path.join(work, name) for name in ('src', 'dst', 'state'))
        files, total = make_model(src, gib, file_mib)
        manifest_s = timed('bash', HELPER, 'manifest', src, state, str(max(streams)), stdout=subprocess.DEVNULL)
        port = free_port()
        conf = os.path.join(work, 'rsyncd.conf')
        with open(conf, 'w') as f:
            f.write('port = %d\naddress = 127.0.0.1\nuse chroot = no\nuid = %d\ngid = %d\n'
                    '[model]\npath = %s\nread only = yes\nexclude = .gb10-*\n'
                    % (port, os.getuid(), os.getgid(), src))
        daemon = subprocess.Popen(['rsync', '--daemon', '--no-detach', '--config=%s' % conf])
        url = 'rsync://127.0.0.1:%d/model' % port
        names = sorted(os.listdir(src))
        rows = []
        try:
            for unused_try in range(50):  # bounded: 5 s
                with socket.socket() as s:
                    if s.connect_ex(('127.0.0.1', port)) == 0:
                        break
                time.sleep(0.1)
            for n in streams:
                lists = []
                for k in range(n):
                    lists.append(os.path.join(work, 'files.%d' % k))
                    with open(lists[-1], 'w') as f:
                        f.write(''.join(name + '\n' for name in names[k::n]))
                transfer, hashing, pull = [], [], []
                for unused_try in range(repeat):
                    shutil.rmtree(dst, ignore_errors=True)
                    os.makedirs(dst)
                    start = time.monotonic()
                    procs = [subprocess.Popen(['rsync', '-a', '--partial', '--files-from=%s' % lst, url + '/', dst + '/'])
                             for lst in lists]
                    if any(p.wait() for p in procs):
                        raise RuntimeError('rsync x%d failed' % n)
                    transfer.append(time.monotonic() - start)
                    start = time.monotonic()
                    procs = [subprocess.Popen(['python3', '-c', HASH_PY] + [os.path.join(dst, name) for name in names[k::n]])
                             for k in range(n)]
                    if any(p.wait() for p in procs):
                        raise RuntimeError('hashing failed')
                    hashing.append(time.monotonic() - start)
                    shutil.rmtree(dst)
                    start = time.monotonic()
                    out = subprocess.run(['bash', HELPER, 'pull', dst, state, str(n), url, str(total)],
                                         capture_output=True, text=True, check=True)
                    pull.append(time.monotonic() - start)
                    if json.loads(out.stdout).get('repaired'):
                        raise RuntimeError('pull x%d repaired files of a fresh copy: %s' % (n, out.stdout))
                t, h, p = min(transfer), min(hashing), min(pull)
                for method, seconds in (('rsync x%d' % n, t), ('SHA-256 x%d' % n, h), ('pull x%d' % n, p)):
                    rows.append({'method': method, 'streams': n, 'seconds': round(seconds, 2),
                                 'mb_s': round(total / seconds / 1e6, 1)})
                rows[-1].update({'transfer_plus_hash_s': round(t + h, 2), 'max_transfer_hash_s': round(max(t, h), 2),
                                 'tries_s': [round(x, 2) for x in pull]})
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)
        return {'bytes': total, 'files': files, 'file_mib': file_mib, 'cpus': os.cpu_count(),
                'manifest_s': round(manifest_s, 2), 'repeat': repeat, 'rows': rows}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(result):
    lines = ['%d files, %.2f GiB, %d CPUs; manifest %.1f s' % (result['files'], result['bytes'] / GIB,
                                                               result['cpus'], result['manifest_s']),
             '', '| method | seconds | MB/s | transfer + hash (s) | max(transfer, hash) (s) |', '|---|---|---|---|---|']
    for row in result['rows']:
        lines.append('| %s | %.2f | %.0f | %s | %s |' % (
            row['method'], row['seconds'], row['mb_s'], row.get('transfer_plus_hash_s', ''),
            row.get('max_transfer_hash_s', '')))
    return '\n'.join(lines)
