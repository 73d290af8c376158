# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What model_sync's pull costs on one machine with cores to spare: its helper
(roles/model_sync/files/gb10-model-sync.sh) pulls a model from a read-only rsync daemon on
127.0.0.1, against the link it runs over and the two things it is made of, each measured alone in
the same run:

  TCP xN      the files' bytes over N plain TCP streams (sendfile), thrown away on arrival: what
              the loopback link carries (memory to memory, like iperf3)
  TCP copy xN the same, written to disk: the ceiling of any file copy on this link and disk
  rsync xN    N rsyncs from the daemon, each on its share of the files (the pull's transfer)
  SHA-256 xN  every copied file hashed by N processes, as the pull's verify does (no copy)
  pull xN     the helper's pull: transfer, each file checked as soon as its stream has it

On a 2-core machine (copy-throughput's two light hosts) sender, receiver and hashing share two
cores, so any overlap is lost to the CPU; this benchmark shows the pull against transfer and hash
where they do not compete for cores: pull ~ max(transfer, hash) means the verify overlaps, pull
~ transfer + hash means it does not; "of link" is each figure against the best TCP xN of the run.
With --split-cpus the source end (the rsync daemon, the TCP senders, the manifest) runs on one
half of the CPUs and the pulling end (everything else) on the other, pinned with taskset: two
nodes of half the cores each, joined by a memory-speed link. Needs only bash, rsync, python3 and
taskset (util-linux) (no Docker, no Ansible).
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
# One plain TCP stream, also copy-throughput's: the sender serves the files (or every file under a
# directory) with sendfile to the first connection and prints "listening" once it can be reached;
# the receiver writes what arrives to one file (/dev/null: memory to memory).
SENDER = '''
import os, socket, sys
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
conn, unused = server.accept()
for path in sys.argv[3:]:
    tree = os.walk(path) if os.path.isdir(path) else [(os.path.dirname(path), [], [os.path.basename(path)])]
    for root, unused, names in tree:
        for name in sorted(names):
            with open(os.path.join(root, name), "rb") as handle:
                conn.sendfile(handle)
conn.close()
'''
RECEIVER = '''
import socket, sys
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])))
buf = memoryview(bytearray(4 << 20))
with open(sys.argv[3], "wb") as out:
    while True:
        n = conn.recv_into(buf)
        if not n:
            break
        out.write(buf[:n])
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


def cpu_halves(split):
    """Command prefixes that pin the source end and the pulling end: each to its half of this
    process's CPUs with --split-cpus, else nothing (both ends share every CPU)."""
    if not split:
        return [], []
    cpus = sorted(os.sched_getaffinity(0))
    half = len(cpus) // 2
    if half == 0:
        raise RuntimeError('--split-cpus needs at least 2 CPUs')
    return [['taskset', '-c', ','.join(str(c) for c in part)] for part in (cpus[:half], cpus[half:])]


def tcp_streams(paths_per_stream, outs, source, pulling):
    """Seconds to move each list of files over its own TCP stream on 127.0.0.1 into the matching
    file of `outs`, all streams at once (timed from the first connection to the last byte);
    `source` and `pulling` prefix the senders' and the receivers' commands."""
    senders = []
    try:
        for paths in paths_per_stream:
            port = free_port()
            senders.append((port, subprocess.Popen(source + ['python3', '-c', SENDER, '127.0.0.1', str(port)] + paths,
                                                   stdout=subprocess.PIPE, text=True)))
        for unused_port, sender in senders:
            if sender.stdout.readline().strip() != 'listening':
                raise RuntimeError('a TCP sender did not start')
        start = time.monotonic()
        receivers = [subprocess.Popen(pulling + ['python3', '-c', RECEIVER, '127.0.0.1', str(port), out])
                     for (port, unused_sender), out in zip(senders, outs)]
        exits = [r.wait() for r in receivers]  # every receiver, not only up to the first that failed
        if any(exits) or any(s.wait(timeout=60) for unused_port, s in senders):
            raise RuntimeError('a TCP stream failed')
        return time.monotonic() - start
    finally:
        for unused_port, sender in senders:
            if sender.poll() is None:
                sender.kill()
            sender.wait()
            sender.stdout.close()


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def run(gib=8, file_mib=512, streams=(4, 8), repeat=2, split_cpus=False):
    source, pulling = cpu_halves(split_cpus)
    work = tempfile.mkdtemp(prefix='gb10-copy-local-')
    try:
        src, dst, state = (os.path.join(work, name) for name in ('src', 'dst', 'state'))
        files, total = make_model(src, gib, file_mib)
        manifest_s = timed(*(source + ['bash', HELPER, 'manifest', src, state, str(max(streams))]),
                           stdout=subprocess.DEVNULL)
        port = free_port()
        conf = os.path.join(work, 'rsyncd.conf')
        with open(conf, 'w') as f:
            f.write('port = %d\naddress = 127.0.0.1\nuse chroot = no\nuid = %d\ngid = %d\n'
                    '[model]\npath = %s\nread only = yes\nexclude = .gb10-*\n'
                    % (port, os.getuid(), os.getgid(), src))
        daemon = subprocess.Popen(source + ['rsync', '--daemon', '--no-detach', '--config=%s' % conf])
        url = 'rsync://127.0.0.1:%d/model' % port
        names = sorted(os.listdir(src))
        rows = []

        def add(method, n, tries):
            """A row from `repeat` tries (seconds): the best counts, all are kept."""
            rows.append({'method': method, 'streams': n, 'seconds': round(min(tries), 2),
                         'mb_s': round(total / min(tries) / 1e6, 1), 'tries_s': [round(x, 2) for x in tries]})
            return rows[-1]
        try:
            for unused_try in range(50):  # bounded: 5 s
                with socket.socket() as s:
                    if s.connect_ex(('127.0.0.1', port)) == 0:
                        break
                time.sleep(0.1)
            for n in sorted({1, max(streams)}):
                shares = [[os.path.join(src, name) for name in names[k::n]] for k in range(n)]
                to_memory = [tcp_streams(shares, [os.devnull] * n, source, pulling) for unused_try in range(repeat)]
                copy = []
                for unused_try in range(repeat):
                    shutil.rmtree(dst, ignore_errors=True)
                    os.makedirs(dst)
                    blobs = [os.path.join(dst, 'blob.%d' % k) for k in range(n)]
                    copy.append(tcp_streams(shares, blobs, source, pulling))
                    if sum(os.path.getsize(blob) for blob in blobs) != total:
                        raise RuntimeError('TCP copy x%d: not every byte arrived' % n)
                add('TCP x%d' % n, n, to_memory)
                add('TCP copy x%d' % n, n, copy)
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
                    procs = [subprocess.Popen(pulling + ['rsync', '-a', '--partial', '--files-from=%s' % lst, url + '/', dst + '/'])
                             for lst in lists]
                    if any(p.wait() for p in procs):
                        raise RuntimeError('rsync x%d failed' % n)
                    transfer.append(time.monotonic() - start)
                    start = time.monotonic()
                    procs = [subprocess.Popen(pulling + ['python3', '-c', HASH_PY] + [os.path.join(dst, name) for name in names[k::n]])
                             for k in range(n)]
                    if any(p.wait() for p in procs):
                        raise RuntimeError('hashing failed')
                    hashing.append(time.monotonic() - start)
                    shutil.rmtree(dst)
                    start = time.monotonic()
                    out = subprocess.run(pulling + ['bash', HELPER, 'pull', dst, state, str(n), url, str(total)],
                                         capture_output=True, text=True, check=True)
                    pull.append(time.monotonic() - start)
                    if json.loads(out.stdout).get('repaired'):
                        raise RuntimeError('pull x%d repaired files of a fresh copy: %s' % (n, out.stdout))
                t, h = min(transfer), min(hashing)
                add('rsync x%d' % n, n, transfer)
                add('SHA-256 x%d' % n, n, hashing)
                add('pull x%d' % n, n, pull).update({'transfer_plus_hash_s': round(t + h, 2),
                                                     'max_transfer_hash_s': round(max(t, h), 2)})
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)
        link = max(row['mb_s'] for row in rows if row['method'].startswith('TCP x'))
        for row in rows:
            row['of_link'] = round(row['mb_s'] / link, 3)
        return {'bytes': total, 'files': files, 'file_mib': file_mib, 'cpus': os.cpu_count(),
                'split_cpus': [prefix[-1] for prefix in (source, pulling) if prefix],  # taskset's CPU lists
                'link_mb_s': link, 'manifest_s': round(manifest_s, 2), 'repeat': repeat, 'rows': rows}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(result):
    lines = ['%d files, %.2f GiB, %d CPUs%s; manifest %.1f s; link = %.0f MB/s (best TCP xN to /dev/null)'
             % (result['files'], result['bytes'] / GIB, result['cpus'],
                ' (source end on %s, pulling end on %s)' % tuple(result['split_cpus']) if result['split_cpus'] else '',
                result['manifest_s'], result['link_mb_s']),
             '', '| method | seconds | MB/s | of link | transfer + hash (s) | max(transfer, hash) (s) |',
             '|---|---|---|---|---|---|']
    for row in result['rows']:
        lines.append('| %s | %.2f | %.0f | %.0f%% | %s | %s |' % (
            row['method'], row['seconds'], row['mb_s'], 100 * row['of_link'], row.get('transfer_plus_hash_s', ''),
            row.get('max_transfer_hash_s', '')))
    return '\n'.join(lines)
