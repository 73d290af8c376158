# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the watchdog (roles/watchdog/files/gb10_watchdog.py, rule O4) reads from the nodes'
exporters before a relaunch, run as the program runs it: laid out as the role lays it out (the
program with its logic module beside it), each node's exporter a real HTTP server on loopback
serving the collection's page as the node exporter serves role node_metrics' page. A copy of the model that a node says is not verified
(M3) stops the relaunch, naming the node; the leak readings come from the same pages. The recovery
around them runs on the simulated cluster (tests/e2e/test_4b_watchdog.py)."""

import http.server
import threading
import time

import pytest

MODEL = '/models/gb10-sim-tiny-llama'


class ExporterPage(http.server.BaseHTTPRequestHandler):
    """Serves its server's page, as a node's exporter serves /metrics with role node_metrics' page."""

    def do_GET(self):
        body = self.server.page.encode()
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain; version=0.0.4')
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def exporters():
    """Start one exporter per node on loopback; {node: url}. Each serves the page given for it."""
    servers = []

    def start(pages):
        urls = {}
        for name, text in pages.items():
            server = http.server.HTTPServer(('127.0.0.1', 0), ExporterPage)
            server.page = text
            threading.Thread(target=server.serve_forever, daemon=True).start()
            servers.append(server)
            urls[name] = 'http://127.0.0.1:%d/metrics' % server.server_address[1]
        return urls
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def page(copy=None, leaked=0, read_at=None):
    """An exporter's page: the node's leak verdict and, where given, model_sync's word on the copy."""
    text = ('gb10_node_metrics_read_ok 1\ngb10_node_metrics_read_timestamp_seconds %f\ngb10_gpu_workload 0\n'
            'gb10_unified_memory_unaccounted_gib 1.5\ngb10_unified_memory_leak_threshold_gib 10\n'
            'gb10_unified_memory_leaked %d\n' % (read_at or time.time(), leaked))
    if copy is not None:
        text += '# from /var/lib/gb10/model_sync/_models_gb10-sim-tiny-llama.prom\n'
        text += 'gb10_model_copy_verified{path="%s"} %d\n' % (MODEL, copy)
    return text


def watchdog(module, tmp_path, urls, **config):
    return module.Watchdog(dict({'data_dir': str(tmp_path / 'data'), 'exporters': urls, 'model_path': MODEL,
                                 'leak_read_timeout_s': 3}, **config))


def test_a_node_whose_copy_is_not_verified_stops_the_relaunch_naming_it(watchdog_program, exporters, tmp_path):
    urls = exporters({'spark1': page(copy=1), 'spark2': page(copy=0)})
    with pytest.raises(RuntimeError) as exc:
        watchdog(watchdog_program, tmp_path, urls).check_model_copies()
    assert str(exc.value).startswith('the model copy at %s on spark2 is not verified' % MODEL), str(exc.value)


def test_verified_copies_and_a_node_without_word_let_the_relaunch_go_on(watchdog_program, exporters, tmp_path, capsys):
    urls = exporters({'spark1': page(copy=1), 'spark2': page()})
    watchdog(watchdog_program, tmp_path, urls).check_model_copies()
    assert 'model copy of spark2 not checked: no word of %s on its page' % MODEL in capsys.readouterr().out


def test_an_exporter_that_does_not_answer_is_waited_for_then_not_checked(watchdog_program, exporters, tmp_path, capsys):
    urls = exporters({'spark1': page(copy=1)})
    urls['spark2'] = 'http://127.0.0.1:9/metrics'  # nothing listens on the discard port
    started = time.monotonic()
    watchdog(watchdog_program, tmp_path, urls).check_model_copies()
    assert 2 <= time.monotonic() - started < 10  # waited its leak_read_timeout_s (3 s), then went on
    assert 'model copy of spark2 not checked: its exporter' in capsys.readouterr().out


def test_the_leak_readings_come_from_the_same_pages(watchdog_program, exporters, tmp_path):
    since = time.time() - 5
    urls = exporters({'spark1': page(leaked=0), 'spark2': page(leaked=1)})
    urls['spark3'] = 'http://127.0.0.1:9/metrics'
    seen = watchdog(watchdog_program, tmp_path, urls).check_leaks(since)
    assert {name: reading['state'] for name, reading in seen.items()} == {
        'spark1': 'healthy', 'spark2': 'leaked', 'spark3': 'unread'}
