# gb10.serving: a node's leak reboot (rules H4 and H1), installed by role leak_recovery on
# every node (tasks_from: reboot_on_ask) and run on the node itself (not in a container) by the
# cluster SSH gate's `reboot-if-leaked` (the command leak_recovery gives the gate of role
# cluster_link) when the head's watchdog asks. The node decides on its own reading, never on the
# caller's word: it reads its unified memory with the collection's own code
# (plugins/module_utils/unified_memory.py, as the unified_memory module and node_metrics' exporter
# do), and reboots only when that reading says leaked (memory nothing accounts for above the
# threshold, no GPU process: only a reboot frees it, H4) and the kernel it would boot has the running
# NVIDIA driver's modules (H1: otherwise it would come back without its GPU). It prints one JSON line
# with what it found and did; the reboot starts two seconds later, after the answer went out.
# Every request is logged on the node with the address that asked (the SSH session's). An ask from
# any peer but the head reboots the node at most once per `reboot_min_interval_s` (an hour): a
# compromised peer that makes or fakes leaks cannot keep it rebooting. The head's own ask (its
# watchdog's verdict, from `head_address`, the head's address on this node's link) and a run on the
# node itself are not a peer's: the watchdog's restart budget already bounds its recoveries, and a
# genuine second leak within the hour (an engine killed with its container again) must not leave the
# node down with the watchdog only watching. Requests are read, decided and logged under a file lock,
# so two asks at once cannot both pass the bound.
"""Usage: gb10_leak_reboot.py CONFIG.json (role leak_recovery's configuration of it)"""

import fcntl
import json
import os
import platform
import shutil
import subprocess
import sys
import time

# The collection's module_utils, copied beside this program under their import path (namespace
# packages): the unified_memory module's reading, nvidia_driver's boot check and the bounded
# command runner the exporter uses too, as they are.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ansible_collections.gb10.serving.plugins.module_utils.boot_kernel import inspect  # noqa: E402
from ansible_collections.gb10.serving.plugins.module_utils.node_command import run  # noqa: E402
from ansible_collections.gb10.serving.plugins.module_utils.unified_memory import MeasureError, measure  # noqa: E402

# shutdown(8) where no reboot command is configured (gb10_reboot_command): systemd stops the
# services, Docker's containers among them, before the reboot.
DEFAULT_REBOOT = "shutdown -r now 'gb10.serving: leaked unified memory (rule H4)'"


def modinfo(path):
    """modinfo's version of a module file; None lets inspect() read the file's own strings."""
    if not shutil.which("modinfo"):
        return None
    rc, out, _err = run(["modinfo", "-F", "version", path])
    return out.strip().splitlines()[0] if rc == 0 and out.strip() else None


def decide(config):
    """What this node found, and whether it reboots: {host, leaked, rebooting, ...}."""
    found = {"host": platform.node(), "leaked": None, "rebooting": False}
    try:
        reading, _warnings = measure(run, proc_root=config["proc_root"], nvidia_smi=config["nvidia_smi"],
                                     gpu_source=config["gpu_source"], cuda_probe=config["cuda_probe"],
                                     leak_threshold_gib=config["leak_threshold_gib"],
                                     baseline_file=config["baseline_file"])
    except MeasureError as exc:
        found["refused"] = "not rebooted: its unified memory could not be read: %s" % exc
        return found
    found.update(leaked=reading["leaked"], unaccounted_gib=reading["unaccounted_gib"],
                 threshold_gib=reading["leak_threshold_gib"], gpu_workload=reading["gpu_workload"])
    if not reading["leaked"]:
        return found
    if config.get("boot_check", True):
        # The pinned branch is the one running: the deploy checked it (H1) and a leak is no driver change.
        branch = (reading.get("driver_version") or "").split(".")[0]
        boot = inspect(config["boot_root"], branch, modinfo, running=platform.release())
        found["next_kernel"] = boot["kernel"]
        if not boot["ok"]:
            found["refused"] = "not rebooted: %s. Fix: %s" % (boot["problem"], boot["fix"])
            return found
    found["rebooting"] = True
    return found


# Requests kept in the log: enough for weeks of a watchdog's asks.
LOG_KEEP = 100


def read_log(path):
    try:
        with open(path) as handle:
            requests = json.load(handle).get("requests", [])
        return requests if isinstance(requests, list) else []
    except (OSError, ValueError, AttributeError):
        return []


def bound(found, requests, now, min_interval_s, peer=True):
    """found with the reboot refused when a peer (not the head, not this node) asks and this node
    rebooted for a leak less than min_interval_s ago."""
    if not found["rebooting"] or not peer:
        return found
    last = max((float(r.get("at", 0)) for r in requests if r.get("rebooting")), default=None)
    if last is not None and now - last < float(min_interval_s):
        found.update(rebooting=False, last_leak_reboot=last,
                     refused="not rebooted: this node rebooted for a leak %d s ago, and reboots for one at most once "
                             "per %d s (reboot_min_interval_s) when a peer other than the head asks: the ask may not "
                             "be genuine. Find what holds the memory; playbooks/recover.yml from the controller "
                             "reboots it through Ansible"
                             % (now - last, float(min_interval_s)))
    return found


def record(path, requests, entry):
    """Append entry to the node's log of leak reboot requests (the newest LOG_KEEP), written whole."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump({"requests": (requests + [entry])[-LOG_KEEP:]}, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def main():
    with open(sys.argv[1]) as handle:
        config = json.load(handle)
    now = time.time()
    # The cluster SSH gate runs this in the asking peer's session: its address is who asked.
    asked_by = (os.environ.get("SSH_CONNECTION") or "").split(" ")[0] or "this node (no SSH session)"
    peer = bool(os.environ.get("SSH_CONNECTION")) and asked_by != config.get("head_address")
    log_path = config["reboot_log"]
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        requests = read_log(log_path)
        found = bound(decide(config), requests, now, config["reboot_min_interval_s"], peer=peer)
        found["asked_by"] = asked_by
        # Logged before the reboot starts, so the bound holds across it.
        record(log_path, requests, {"at": round(now, 3), "asked_by": asked_by, "leaked": found["leaked"],
                                    "unaccounted_gib": found.get("unaccounted_gib"), "rebooting": found["rebooting"],
                                    "refused": found.get("refused")})
    print(json.dumps(found, sort_keys=True), flush=True)
    if found["rebooting"]:
        # Its own session, so the end of the SSH session that asked does not take it down.
        subprocess.Popen(["sh", "-c", "sleep 2; exec %s" % (config.get("reboot_command") or DEFAULT_REBOOT)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
