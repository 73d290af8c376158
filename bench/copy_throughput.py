# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model copy throughput between two light hosts, as a fraction of the same link measured in the
same run. Host A gets a model-like directory (safetensors-sized files of random, incompressible
data); then, each into an empty directory on host B:

  link        iperf3 A -> B, 1 and N TCP streams (memory to memory: what the link carries)
  TCP copy    the files' bytes as one plain TCP stream, written to disk on B (no rsync, no checks)
  rsync       one rsync from a read-only rsync daemon on A (single-stream rsync speed)
  rsync xN    N rsyncs from that daemon, each on its share of the files (model_sync's transfer)
  model_sync  the real role gb10.serving.model_sync with model_sync_streams=N, via
              ansible-runner; its pull task's time (copy, each file's SHA-256 checked as soon as
              rsync has it) from the events
  SHA-256 xN  the pull's checksum work alone on B: every file hashed, N processes, no copy

MB/s is 10^6 bytes per second of the model's bytes; each figure is the best of --repeat tries
(other jobs share the machine; every try is in the JSON). iperf3 comes from Debian's package (apt-get
download on the controller, installed into the hosts with dpkg); without it the TCP copy is the
link figure."""
import json
import os
import shlex
import shutil
import subprocess
import time

import docker

from bench.copy_local import HASH_PY, RECEIVER, SENDER
from bench.events import task_results, task_span
from bench.hosts import OUT, TOP, light_hosts
from bench.runner import changed_total, run_playbook

PLAYBOOK = os.path.join(TOP, 'bench', 'playbooks', 'model_sync.yml')
MODEL = '/srv/models/bench-model'
COPY = '/srv/copy'
PULL_TASK = 'Pull, verify every checksum, re-fetch mismatches, mark verified'
MANIFEST_TASK = 'Manifest of the model on the source (sizes and SHA-256; reused while no file changes)'
IPERF_PACKAGES = ('iperf3', 'libiperf0', 'libsctp1')
IPERF_SECONDS = 10
RSYNC_PORT = 8731  # not model_sync's 8730: the role starts its own daemon there
NC_PORT = 5202
GIB = 1024 ** 3


def sh(container, script, *args, detach=False):
    """Run a bash script (args in $1...) in a host; its output, or RuntimeError naming the host
    and the script."""
    result = container.exec_run(['bash', '-c', 'set -euo pipefail\n' + script, 'bench'] + list(args),
                                detach=detach)
    if detach:
        return ''
    output = result.output.decode(errors='replace')
    if result.exit_code != 0:
        raise RuntimeError('%s: `%s` exited %d: %s'
                           % (container.name, script, result.exit_code, output[-2000:]))
    return output


def timed(container, script, *args):
    """Seconds `script` took, timed inside the host (no docker exec start-up in the figure)."""
    out = sh(container, 's=$(date +%s%N)\n' + script + '\ne=$(date +%s%N)\necho "elapsed_ns $((e - s))"',
             *args)
    return int(out.split()[-1]) / 1e9


def check_disk(client, gib):
    # A holds the model and B one copy at a time; both live in the engine's data root.
    root = client.info().get('DockerRootDir', '/var/lib/docker')
    free = shutil.disk_usage(root).free
    need = (2 * gib + 4) * GIB
    if free < need:
        raise RuntimeError('%s has %.1f GiB free; --gib %s needs %.1f GiB (model on A, copy on B, '
                           '4 GiB spare). Use a smaller --gib.' % (root, free / GIB, gib, need / GIB))
    return free


def fetch_debs(name, packages):
    """Directory with the .deb files of `packages` (apt-get download from the controller's Debian
    mirror; the hosts are the same release), or None when the mirror does not answer."""
    debs = os.path.join(OUT, 'debs', name)
    os.makedirs(debs, exist_ok=True)
    if not all(any(f.startswith(p + '_') for f in os.listdir(debs)) for p in packages):
        try:
            subprocess.run(['apt-get', 'download'] + list(packages), cwd=debs, check=True,
                           timeout=120, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except (OSError, subprocess.SubprocessError):
            return None
    return debs


def install_debs(container, debs):
    target = '/tmp/gb10-bench-debs/%s' % os.path.basename(debs)
    sh(container, 'mkdir -p %s' % target)
    subprocess.run(['docker', 'cp', debs + '/.', '%s:%s' % (container.name, target)], check=True)
    # Libraries first: dpkg -i does not order pre-dependencies for us.
    sh(container, 'cd %s && dpkg -i lib*.deb >/dev/null && dpkg -i *.deb >/dev/null' % target)


def make_model(container, gib, file_mib):
    """safetensors-sized files of random data plus small JSON files; returns (files, bytes)."""
    count = max(1, int(gib * 1024 // file_mib))
    names = ['model-%05d-of-%05d.safetensors' % (i + 1, count) for i in range(count)]
    sh(container, 'mkdir -p %s && cd %s && echo \'{"architectures": ["Bench"]}\' >config.json\n'
       'printf "%%s\\n" %s | xargs -P 2 -I{} sh -c "head -c %dM /dev/urandom >{}"'
       % (MODEL, MODEL, ' '.join(names), file_mib))
    return names + ['config.json'], copied_bytes(container, MODEL)


def copied_bytes(container, path):
    """Sum of the sizes of the files under `path` (du would count the directories too)."""
    return sum(int(size) for size in sh(container, "find %s -type f -printf '%%s\\n'" % path).split())


def clear(container, *paths):
    sh(container, 'rm -rf %s' % ' '.join(paths))
    os.sync()  # the previous copy's dirty pages must not be written during the next one


def iperf3(a, b, ip_b, streams):
    """MB/s received by B from A with `streams` parallel TCP streams."""
    sh(b, 'iperf3 -s -D -1 -B %s >/dev/null' % ip_b)
    out = sh(a, 'for _ in $(seq 50); do iperf3 -c %s -t %d -P %d -J && exit 0; sleep 0.2; done; exit 1'
             % (ip_b, IPERF_SECONDS, streams))
    return json.loads(out)['end']['sum_received']['bits_per_second'] / 8 / 1e6


def wait_listening(container, port, seconds=10):
    """Wait (bounded) until something listens on TCP `port` in the host; a probe connection would
    take the one connection a `nc -l` accepts, so ask the host's socket table instead."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ':%d ' % port in sh(container, 'ss -Hltn'):
            return
        time.sleep(0.2)
    raise RuntimeError('%s: nothing listens on port %d after %d s' % (container.name, port, seconds))


def tcp_copy(a, b, ip_a):
    """The model's bytes as one plain TCP stream (sendfile on A), written to one file on B."""
    sh(a, 'python3 -c "$1" %s %d %s' % (ip_a, NC_PORT, MODEL), SENDER, detach=True)
    wait_listening(a, NC_PORT)
    return timed(b, 'mkdir -p %s\npython3 -c "$1" %s %d %s/blob' % (COPY, ip_a, NC_PORT, COPY), RECEIVER)


def start_rsyncd(a, ip_a):
    sh(a, 'cat >/tmp/gb10-bench-rsyncd.conf <<EOF\npid file = /tmp/gb10-bench-rsyncd.pid\n'
       'port = %d\naddress = %s\nuse chroot = no\nuid = root\ngid = root\n[model]\npath = %s\n'
       'read only = yes\nEOF\nrsync --daemon --config=/tmp/gb10-bench-rsyncd.conf' % (RSYNC_PORT, ip_a, MODEL))
    wait_listening(a, RSYNC_PORT)


def rsync_parallel(b, ip_a, files, streams):
    """The transfer model_sync's helper does: the file list split round-robin into `streams`
    parts, one rsync per part, all at once."""
    url = 'rsync://%s:%d/model/' % (ip_a, RSYNC_PORT)
    sh(b, 'mkdir -p %s && rm -f /tmp/gb10-files* && printf "%%s\\n" %s >/tmp/gb10-files\n'
       'split -n r/%d /tmp/gb10-files /tmp/gb10-files.' % (COPY, ' '.join(files), streams))
    return timed(b, 'pids=""\nfor p in /tmp/gb10-files.*; do [ -s "$p" ] || continue\n'
                 '  rsync -a --partial --files-from="$p" %s %s/ & pids="$pids $!"; done\n'
                 'for p in $pids; do wait "$p"; done' % (url, COPY))


def role_run(inventory, streams, state_dir):
    extravars = {'model_sync_path': MODEL, 'model_sync_streams': streams,
                 'model_sync_state_dir': state_dir}
    wall, stats, events = run_playbook(PLAYBOOK, inventory, extravars=extravars)
    return wall, changed_total(stats), events


def run(gib=4, file_mib=512, streams=(1, 4, 8), repeat=2):
    client = docker.from_env(timeout=600)
    load_before = os.getloadavg()
    free = check_disk(client, gib)
    debs = fetch_debs('iperf3', IPERF_PACKAGES)
    rows = []
    with light_hosts(2) as (inventory, hosts):
        (name_a, ip_a), (name_b, ip_b) = hosts
        a, b = client.containers.get(name_a), client.containers.get(name_b)
        files, total = make_model(a, gib, file_mib)
        os.sync()

        def add(method, kind, tries, note='', mb_s=None):
            """A row from `repeat` tries (seconds): the best one counts, the others were slowed by
            other jobs on the machine; all are kept in the JSON."""
            seconds = min(tries)
            rows.append({'method': method, 'kind': kind, 'seconds': round(seconds, 2),
                         'mb_s': round(mb_s if mb_s is not None else total / seconds / 1e6, 1),
                         'tries_s': [round(t, 2) for t in tries], 'note': note})
            return rows[-1]

        if debs:
            for host in (a, b):
                install_debs(host, debs)
        if debs:
            for n in sorted({1, max(streams)}):
                rates = [iperf3(a, b, ip_b, n) for unused_try in range(repeat)]
                add('iperf3 -P %d' % n, 'link', [IPERF_SECONDS], 'memory to memory, %d s, %d TCP stream%s'
                    % (IPERF_SECONDS, n, 's' if n > 1 else ''), mb_s=max(rates))['tries_mb_s'] = rates

        def tcp_try():
            seconds = tcp_copy(a, b, ip_a)
            if copied_bytes(b, COPY) != total:
                raise RuntimeError('TCP copy: %d of %d bytes arrived' % (copied_bytes(b, COPY), total))
            clear(b, COPY)
            return seconds
        add('TCP copy', 'link' if not debs else 'raw copy', [tcp_try() for unused_try in range(repeat)],
            'the files\' bytes in one TCP stream (sendfile), written to disk on B')

        start_rsyncd(a, ip_a)

        def rsync_try(n):
            seconds = rsync_parallel(b, ip_a, files, n)
            if copied_bytes(b, COPY) != total:
                raise RuntimeError('rsync x%d copied %d of %d bytes' % (n, copied_bytes(b, COPY), total))
            clear(b, COPY)
            return seconds
        for n in streams:
            add('rsync' if n == 1 else 'rsync x%d' % n, 'rsync', [rsync_try(n) for unused_try in range(repeat)],
                'daemon on A, %d stream%s' % (n, 's' if n > 1 else ''))
        sh(a, 'kill "$(cat /tmp/gb10-bench-rsyncd.pid)"')

        state_dir = '/var/lib/gb10-bench/model_sync'
        for n in streams:
            tries = []
            for unused_try in range(repeat):
                clear(b, MODEL, state_dir)
                wall, changed, events = role_run(inventory, n, state_dir)
                pull = task_span(events, PULL_TASK)
                if pull is None:
                    raise RuntimeError('model_sync streams=%d did not run its pull task on %s' % (n, name_b))
                tries.append((pull, wall, task_span(events, MANIFEST_TASK) or 0, changed,
                              task_results(events, PULL_TASK).get(name_b, {}).get('stdout', '').strip()))
            pull, wall, manifest, changed, result = min(tries)
            add('model_sync streams=%d' % n, 'model_sync', [t[0] for t in tries],
                'pull task (copy, each file SHA-256-checked as it lands); role %.1f s, manifest %.1f s' % (wall, manifest)).update({
                    'role_wall_s': round(wall, 2), 'manifest_s': round(manifest, 2),
                    'role_mb_s': round(total / wall / 1e6, 1), 'changed': changed, 'pull_result': result})
        noop_wall, noop_changed, unused_events = role_run(inventory, max(streams), state_dir)
        # What the pull's verify costs alone: the helper's SHA-256 (python3 hashlib, OpenSSL's
        # code with SHA extensions) over every file, as many processes as streams, no copy.
        n = max(streams)
        add('SHA-256 x%d on B' % n, 'cpu',
            [timed(b, 'cd %s && find . -type f -print0 | xargs -0 -n 1 -P %d python3 -c %s'
                   % (MODEL, n, shlex.quote(HASH_PY))) for unused_try in range(repeat)],
            'reads and hashes every file, as the pull\'s verify does, with no copy')
    link = max(r['mb_s'] for r in rows if r['kind'] == 'link')
    for row in rows:
        row['of_link'] = round(row['mb_s'] / link, 3)
    return {'bytes': total, 'files': len(files), 'file_mib': file_mib, 'free_gib_before': round(free / GIB, 1),
            'link_mb_s': link, 'noop_rerun_s': round(noop_wall, 2), 'noop_changed': noop_changed,
            'repeat': repeat, 'cpus': os.cpu_count(), 'loadavg_before': load_before, 'loadavg_after': os.getloadavg(),
            'rows': rows}


def table(result):
    lines = ['%d files, %.2f GiB; link = %.0f MB/s (best iperf3 figure of this run, else the TCP copy); '
             'model_sync no-op re-run %.1f s, changed=%d'
             % (result['files'], result['bytes'] / GIB, result['link_mb_s'], result['noop_rerun_s'],
                result['noop_changed']), '',
             '| method | seconds | MB/s | of link | what |', '|---|---|---|---|---|']
    for r in result['rows']:
        lines.append('| %s | %.1f | %.0f | %.0f%% | %s |' % (
            r['method'], r['seconds'], r['mb_s'], 100 * r['of_link'], r['note']))
    return '\n'.join(lines)
