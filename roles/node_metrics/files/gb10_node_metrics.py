# gb10.serving: a node's metrics exporter (rule O6), installed by role node_metrics on
# every node. It runs in a container of the serving image (host network and PID namespace,
# restarted by Docker with the node), reads the node's unified memory with the collection's own
# reading (plugins/module_utils/unified_memory.py, the code of the gb10.serving.unified_memory
# module, copied beside this file under its collection path) every interval, and serves it with
# the collection's textfiles (*.prom under the state folder: the watchdog's, the link check's) at
# http://<node>:<port>/metrics for Prometheus. It only reads; it changes nothing on the node.
"""Usage: gb10_node_metrics.py CONFIG.json"""

import datetime
import http.server
import json
import os
import signal
import sys
import threading
import time

# The collection's module_utils, copied under their import path (namespace packages).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ansible_collections.gb10.serving.plugins.module_utils import gpu_clock, node_metrics  # noqa: E402
from ansible_collections.gb10.serving.plugins.module_utils.node_command import run  # noqa: E402
from ansible_collections.gb10.serving.plugins.module_utils.unified_memory import MeasureError, measure  # noqa: E402


def log(message):
    print("%s gb10-node-metrics: %s" % (datetime.datetime.now(datetime.timezone.utc).strftime("%FT%TZ"), message),
          flush=True)


def read_memory(config):
    """The unified_memory module's reading of this node, with the role's configuration: (reading,
    warnings); MeasureError when it cannot be read."""
    return measure(run, proc_root=config["proc_root"], nvidia_smi=config["nvidia_smi"],
                   gpu_source=config["gpu_source"], cuda_probe=config["cuda_probe"],
                   leak_threshold_gib=config["leak_threshold_gib"], baseline_file=config["baseline_file"])


def read_clock(config):
    """(SM clock MHz, utilization %) from the node's nvidia-smi; ClockError when it cannot say."""
    rc, out, err = run([config["nvidia_smi"]] + gpu_clock.query_args())
    if rc != 0:
        raise gpu_clock.ClockError("%s exited %d: %s" % (config["nvidia_smi"], rc, (err or out).strip()[-300:]))
    return gpu_clock.parse(out)


class Exporter(object):
    def __init__(self, config):
        self.config = config
        self.lock = threading.Lock()
        self.own = ""
        self.last_error = None
        self.last_clock_error = None
        # The last readings under load (H12): the verdict holds between loads, as the state does.
        self.under_load = []

    def read(self):
        started = time.time()
        reading, error = None, None
        try:
            reading, _warnings = read_memory(self.config)
        except MeasureError as exc:
            error = str(exc)
        # Logged when it changes, not on every read: the log stays readable over weeks.
        if error != self.last_error:
            log("read failed: %s" % error if error else "reading the node")
            self.last_error = error
        # The GPU's clock and load (H12), apart from memory: a clock query that fails costs its own
        # series, not the memory figures.
        clock, clock_error = None, None
        try:
            clock = read_clock(self.config)
            self.under_load = gpu_clock.keep(self.under_load, clock[0], clock[1], round(time.time(), 3))
        except gpu_clock.ClockError as exc:
            clock_error = str(exc)
        if clock_error != self.last_clock_error:
            log("clock read failed: %s" % clock_error if clock_error else "reading the GPU clock")
            self.last_clock_error = clock_error
        floor = self.config["gpu_clock_floor_mhz"]
        text = (node_metrics.metrics_text(reading, error, round(time.time(), 3), time.time() - started)
                + node_metrics.clock_text(clock, gpu_clock.verdict(self.under_load, floor), floor))
        with self.lock:
            self.own = text

    def page(self):
        with self.lock:
            own = self.own
        return node_metrics.page(own, node_metrics.textfiles(self.config["textfile_root"]))

    def loop(self, stop):
        while not stop.wait(self.config["interval_s"]):
            self.read()


def handler_for(exporter):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                body, status, kind = b"gb10.serving node metrics: GET /metrics\n", 404, "text/plain"
            else:
                body, status, kind = exporter.page().encode(), 200, "text/plain; version=0.0.4; charset=utf-8"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass  # one line per scrape would bury the read failures

    return Handler


def main():
    with open(sys.argv[1]) as handle:
        config = json.load(handle)
    exporter = Exporter(config)
    exporter.read()  # the first scrape already has figures
    server = http.server.ThreadingHTTPServer((config["address"], config["port"]), handler_for(exporter))
    stop = threading.Event()

    def shutdown(*_):
        stop.set()
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, shutdown)
    threading.Thread(target=exporter.loop, args=(stop,), daemon=True).start()
    log("serving http://%s:%d/metrics, a read every %d s" % (config["address"], config["port"], config["interval_s"]))
    server.serve_forever()


if __name__ == "__main__":
    main()
