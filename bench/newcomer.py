# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The newcomer's first command: `scripts/sim.sh deploy` from a fresh clone of this
checkout's HEAD, on this machine made to look as if it never ran the project:

  - the machine's Docker engine is stopped and a second one started on an empty data root (no
    image, no build cache, no volume), on the usual socket, so that every image is built from
    Debian and every host is made anew;
  - the controller's virtualenv cache (GB10_VENV_CACHE) and pip's cache are empty folders;
  - the clone has no .cache/ (no resolved wheels, no tiny model).

What stays is what a machine that never ran the suite has too: the Debian packages (docker.io,
debootstrap, prometheus: scripts/host-deps.sh's apt installs, about a minute, are not in the
figure) and the machine's local wheel folders that pip's configuration names.

The figure is the command's wall time to its end (the chat answer the deploy prints). Its phases
come from the command's own progress lines, each stamped when it arrives (the build scripts'
"build_*:" lines, tests/sim/cluster.py's "sim:" lines, and ansible-playbook's "PLAY [" lines): the
command is a shell script a user types, not a playbook ansible-runner drives, so its lines are
what there is to read.

Afterwards the bench engine's simulated cluster is removed, that engine stopped and its data root
deleted, and the machine's own engine started again (scripts/host-deps.sh) with its images and
caches as they were. It stops the machine's Docker engine for about 15 minutes: run it only on a
machine where nothing else uses Docker, and where no service manager restarts dockerd (it refuses
where systemd runs docker.service)."""
import os
import shutil
import signal
import subprocess
import time

from bench.hosts import OUT, TOP

WORK = '/var/tmp/gb10-bench-newcomer'
# (phase, the start of the line that opens it), in the order the command prints them.
MARKERS = (
    ('controller venv (scripts/setup.sh)', None),
    ('base image (debootstrap)', 'build_base: debootstrap'),
    ('simulated host image', 'build_host: building'),
    ('serving image: wheels', 'build_serving: resolving wheels'),
    ('serving image: docker build', 'build_serving: building'),
    ('tiny model', 'build_model: making'),
    ('hosts: create, load the image', 'sim: creating'),
    ('deploy (ansible-playbook)', 'PLAY ['),
)


def _engine_pid():
    try:
        with open('/var/run/docker.pid') as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def _stop_machine_engine(timeout=120):
    """Stop the engine this machine runs (not a child of this process: gone once kill(0) fails)."""
    pid = _engine_pid()
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(1)
    raise RuntimeError('dockerd (pid %d) did not stop within %d s' % (pid, timeout))


def _start_bench_engine(log):
    """A dockerd on an empty data root under WORK, on the usual socket; returns its process."""
    with open(log, 'a') as out:
        engine = subprocess.Popen(['dockerd', '--data-root', os.path.join(WORK, 'docker'),
                                   '--exec-root', os.path.join(WORK, 'exec')],
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    for unused_try in range(180):
        if subprocess.run(['docker', 'info'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          check=False).returncode == 0:
            return engine
        time.sleep(1)
    raise RuntimeError('the bench dockerd did not answer within 180 s; its log: %s' % log)


def _systemd_runs_docker():
    return bool(shutil.which('systemctl')) and subprocess.run(
        ['systemctl', 'is-active', '--quiet', 'docker.service'], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, check=False).returncode == 0


def _phases(lines, total):
    """[(phase, seconds)] from the stamped lines: each phase runs from its marker to the next one
    seen (a phase whose marker never came, an image found ready, gets no row)."""
    starts = [(MARKERS[0][0], 0.0)]
    for phase, marker in MARKERS[1:]:
        stamp = next((t for t, line in lines if line.startswith(marker)), None)
        if stamp is not None:
            starts.append((phase, stamp))
    starts.sort(key=lambda item: item[1])
    return [(phase, round((starts[i + 1][1] if i + 1 < len(starts) else total) - start, 1))
            for i, (phase, start) in enumerate(starts)]


def run():
    if _systemd_runs_docker():
        raise RuntimeError('systemd runs docker.service and would start it again under the bench engine: '
                           'stop it first (systemctl stop docker.socket docker.service), start it after')
    head = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=TOP, check=True,
                          stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
    # The machine's own simulated cluster would hold the fixed addresses; its volumes (the loaded
    # image's cache) stay for after.
    subprocess.run([os.path.join(TOP, 'scripts', 'sim.sh'), 'down', '--keep-cache'], cwd=TOP, check=True)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    clone = os.path.join(WORK, 'clone')
    subprocess.run(['git', 'clone', '-q', TOP, clone], check=True)
    env = dict(os.environ, GB10_VENV_CACHE=os.path.join(WORK, 'venvs'), PIP_CACHE_DIR=os.path.join(WORK, 'pip'))
    for name in ('VIRTUAL_ENV', 'ANSIBLE_COLLECTIONS_PATH', 'ANSIBLE_CONFIG'):
        env.pop(name, None)
    env['PATH'] = ':'.join(p for p in env['PATH'].split(':') if not p.startswith(TOP))
    lines = []
    _stop_machine_engine()
    engine = None
    try:
        engine = _start_bench_engine(os.path.join(WORK, 'dockerd.log'))
        start = time.monotonic()
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, 'newcomer.log'), 'w') as keep:
            proc = subprocess.Popen([os.path.join(clone, 'scripts', 'sim.sh'), 'deploy'], cwd=clone, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
            for line in proc.stdout:
                lines.append((round(time.monotonic() - start, 1), line.rstrip('\n')))
                keep.write('%7.1f %s' % (lines[-1][0], line))
                keep.flush()
            rc = proc.wait()
        total = round(time.monotonic() - start, 1)
        subprocess.run([os.path.join(clone, 'scripts', 'sim.sh'), 'down'], cwd=clone, env=env, check=False)
    finally:
        if engine is not None:
            engine.terminate()
            engine.wait(timeout=120)
        shutil.rmtree(WORK, ignore_errors=True)
        subprocess.run([os.path.join(TOP, 'scripts', 'host-deps.sh')], check=True)
    return result_of(head, rc, total, lines)


def result_of(head, rc, total, lines):
    """The bench's result from the command's stamped lines (also for a log newcomer.log kept)."""
    result = {'commit': head, 'rc': rc, 'wall_s': total, 'phases': _phases(lines, total),
              'loads': [line for unused_t, line in lines if ' loaded in ' in line or 'hosts up in' in line],
              'plays': [(t, line[len('PLAY ['):line.rindex(']')]) for t, line in lines if line.startswith('PLAY [')],
              'tail': [line for unused_t, line in lines[-12:]]}
    if rc != 0:
        raise RuntimeError('scripts/sim.sh deploy failed (rc %d): %s' % (rc, '\n'.join(result['tail'])))
    return result


def table(result):
    lines = ['The newcomer\'s `scripts/sim.sh deploy` at %s: %.0f s (%.1f min)' % (
        result['commit'], result['wall_s'], result['wall_s'] / 60), '', '| phase | s |', '|---|---|']
    lines += ['| %s | %.1f |' % (phase, seconds) for phase, seconds in result['phases']]
    return '\n'.join(lines + [''] + ['- %s' % line for line in result['loads']])
