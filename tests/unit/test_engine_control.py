# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine's one control script (roles/vllm_serve/files/engine_control.sh), run for
real with `sh -c` as the role's tasks and the watchdog run it: a stand-in engine (a process whose
command line names vllm, its pid in the state folder, /health on a loopback port), its status,
its readiness, its death, Ray keeping its GPUs back, and its graceful stop (H4)."""

import http.server
import json
import os
import subprocess
import sys
import threading

import pytest

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H4", "O4")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(TOP, 'roles', 'vllm_serve', 'files', 'engine_control.sh')) as _f:
    SCRIPT = _f.read()


def control(*args, timeout=60):
    """(rc, stdout) as tasks/probe.yml, engine.yml and stop.yml run it."""
    done = subprocess.run(['sh', '-c', SCRIPT, 'engine-control'] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout, check=False)
    return done.returncode, done.stdout.strip()


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200 if self.path == '/health' else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def health_url():
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield 'http://127.0.0.1:%d' % server.server_address[1]
    server.shutdown()


def unused_url():
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Health)
    port = server.server_address[1]
    server.server_close()
    return 'http://127.0.0.1:%d' % port


def reaped(proc):
    """Reaped the moment it exits, as the head container's init reaps the engine: a zombie would
    still answer kill -0."""
    threading.Thread(target=proc.wait, daemon=True).start()


@pytest.fixture
def engine(tmp_path):
    """A stand-in engine: a process whose command line names vllm, as the launch script's exec leaves it."""
    proc = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', 'vllm', 'serve'])
    reaped(proc)
    (tmp_path / 'pid').write_text('%d\n' % proc.pid)
    (tmp_path / 'running.sh').write_text('#!/bin/bash\n# gb10-engine-id: abc123\n')
    (tmp_path / 'engine.log').write_text('INFO starting\n')
    yield proc
    proc.kill()
    proc.wait()


def test_status_of_a_serving_engine_and_of_none(tmp_path, engine, health_url):
    rc, out = control('status', tmp_path, health_url)
    assert rc == 0 and json.loads(out) == {'alive': True, 'healthy': True, 'id': 'abc123', 'pid': str(engine.pid)}
    rc, out = control('status', tmp_path, unused_url())
    assert json.loads(out)['healthy'] is False and json.loads(out)['alive'] is True
    # A headless rank of the mp executor has no API: without a URL it is read alive, never healthy.
    rc, out = control('status', tmp_path)
    assert rc == 0 and json.loads(out) == {'alive': True, 'healthy': False, 'id': 'abc123', 'pid': str(engine.pid)}
    empty = tmp_path / 'none'
    empty.mkdir()
    assert json.loads(control('status', empty, health_url)[1]) == {'alive': False, 'healthy': False, 'id': '', 'pid': ''}


def test_wait_ready_answers_ready_gone_stuck_or_not_yet(tmp_path, engine, health_url):
    assert control('wait-ready', tmp_path, health_url, 30, 300) == (0, 'ready')
    # Not ready yet, the seconds run out: the last log line says where it stands.
    rc, out = control('wait-ready', tmp_path, unused_url(), 2, 300)
    assert rc == 1 and 'last log line: INFO starting' in out
    # Ray has not given the engine its GPUs for longer than the bound (R5).
    with open(str(tmp_path / 'engine.log'), 'a') as log:
        log.write('INFO Waiting for creating a placement group of specs for 30 seconds.\n'
                  'INFO Waiting for creating a placement group of specs for 310 seconds.\n')
    rc, out = control('wait-ready', tmp_path, unused_url(), 30, 300)
    assert rc == 4 and 'for 310 s' in out
    engine.kill()
    engine.wait()
    rc, out = control('wait-ready', tmp_path, unused_url(), 30, 300)
    assert rc == 3 and 'engine process %d is gone' % engine.pid in out


def test_wait_ready_before_the_launch_script_wrote_its_pid(tmp_path, health_url):
    rc, out = control('wait-ready', tmp_path, health_url, 1, 300)
    assert (rc, out) == (1, 'engine starting (no pid yet)')


def test_stop_sends_sigterm_first_and_says_what_it_did(tmp_path, engine, health_url):
    assert control('stop', tmp_path, 30) == (0, 'stopped')
    assert engine.wait(timeout=10) == -15  # SIGTERM, not SIGKILL
    assert control('stop', tmp_path, 30) == (0, 'none')


def test_stop_kills_an_engine_that_ignores_sigterm_after_its_seconds(tmp_path):
    proc = subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); '
                             'print("up", flush=True); time.sleep(120)', 'vllm'], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == 'up'
    reaped(proc)
    (tmp_path / 'pid').write_text(str(proc.pid))
    assert control('stop', tmp_path, 1) == (0, 'killed')
    assert proc.wait(timeout=10) == -9


def test_a_pid_another_process_took_is_no_engine(tmp_path):
    (tmp_path / 'pid').write_text(str(os.getpid()))  # pytest: no vllm in its command line
    assert control('stop', tmp_path, 1) == (0, 'none')
    assert json.loads(control('status', tmp_path, unused_url())[1])['alive'] is False


def test_an_unknown_command_is_refused():
    rc, unused = control('restart', '/tmp')
    assert rc == 2
