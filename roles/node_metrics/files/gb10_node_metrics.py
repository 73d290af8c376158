# gb10.serving: a node's metrics reader (rule O6), installed by role node_metrics on every
# node. It runs in a container of the serving image (host PID namespace, no network, restarted by
# Docker with the node), reads the node's unified memory with the collection's own reading
# (plugins/module_utils/unified_memory.py, the code of the gb10.serving.unified_memory module,
# copied beside this file under its collection path) and the GPU's clock every interval, and writes
# them with the collection's textfiles (*.prom under the state folder: the watchdog's, the link
# check's) as one page into the node exporter's textfile folder, which serves it at
# http://<node>:<port>/metrics for Prometheus. It writes that page only; it changes nothing else.
"""Usage: gb10_node_metrics.py CONFIG.json"""

import datetime
import glob
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


class Reader(object):
    def __init__(self, config):
        self.config = config
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
        self.own = text

    def page(self):
        return node_metrics.page(self.own, node_metrics.textfiles(self.config["textfile_root"]))


def write_page(path, text):
    """The page replaced whole: the node exporter's textfile collector reads only *.prom files, so
    it never reads the temporary one, and a rename never leaves it half a page."""
    temporary = "%s.%d.tmp" % (path, os.getpid())
    with open(temporary, "w") as handle:
        handle.write(text)
    os.chmod(temporary, 0o644)  # the node exporter runs as its own user
    os.rename(temporary, path)


def main():
    with open(sys.argv[1]) as handle:
        config = json.load(handle)
    reader = Reader(config)
    # A temporary page a killed reader left is not served (not *.prom), but would stay.
    for leftover in glob.glob(glob.escape(config["page"]) + ".*.tmp"):
        os.remove(leftover)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log("writing %s for the node exporter, a read every %d s" % (config["page"], config["interval_s"]))
    last_error = None
    while True:
        reader.read()
        # A page that cannot be written (the folder gone) is logged when that changes, and tried
        # again at the next read: the node exporter meanwhile serves the last one, whose read time says how old.
        error = None
        try:
            write_page(config["page"], reader.page())
        except (IOError, OSError) as exc:
            error = str(exc)
        if error != last_error:
            log("cannot write the page: %s" % error if error else "page written")
            last_error = error
        if stop.wait(config["interval_s"]):
            return


if __name__ == "__main__":
    main()
