# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What NCCL would print at init on a simulated Spark: the stand-in for NCCL's transport choice.

The simulated ranks talk Gloo over the link network (there is no GPU and no NCCL); what the
collection checks after a launch (rule N5, role vllm_serve) is which transport NCCL took, read from
its init lines in the engine's log. This module prints those lines the way NCCL 2.31.2 does (the
formats of the captures in tests/fixtures/nccl/), deciding as NCCL does on a Spark:

- NCCL_IB_DISABLE=1 or NCCL_NET=Socket: sockets, on purpose (N4);
- otherwise IB when the container can use the RDMA devices: the verbs device nodes under
  /dev/infiniband and the IPC_LOCK capability to pin memory (what `--device /dev/infiniband
  --cap-add IPC_LOCK` give). The memlock limit is not modelled: the sandbox that runs the
  simulation cannot raise it (tests/sim/README.md);
- otherwise NCCL's own fallback: "NET/IB : No device found.", "Failed to initialize NET plugin
  IB", then sockets, with exit status 0: the silent fallback rule N5 is about.

Printed only with NCCL_DEBUG=INFO (nccl_env sets it), once per rank, on stdout: Ray carries it to
the engine's log with the worker's prefix, as it carries NCCL's own lines.
"""

import os
import socket
import sys

CAP_IPC_LOCK = 14
RDMA_DIR = "/dev/infiniband"


def _can_use_rdma():
    try:
        verbs = [name for name in os.listdir(RDMA_DIR) if name.startswith("uverbs")]
    except OSError:
        verbs = []
    try:
        with open("/proc/self/status") as handle:
            caps = next(line.split()[1] for line in handle if line.startswith("CapEff:"))
        ipc_lock = bool(int(caps, 16) >> CAP_IPC_LOCK & 1)
    except (OSError, StopIteration, ValueError):
        ipc_lock = False
    return bool(verbs) and ipc_lock


def _address(iface):
    """The interface's IPv4 address (as NCCL's OOB field shows it), or 0.0.0.0."""
    try:
        import fcntl
        import struct
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            packed = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", iface[:15].encode()))  # SIOCGIFADDR
        return socket.inet_ntoa(packed[20:24])
    except OSError:
        return "0.0.0.0"


def init_lines(env, can_use_rdma, host, pid, address_of):
    """NCCL's INFO lines for this rank's communicator init (without NCCL's "host:pid:tid [0] ")."""
    iface = env.get("NCCL_SOCKET_IFNAME", "eth0")
    ip = address_of(iface)
    lines = ["NCCL_SOCKET_IFNAME set by environment to %s" % iface,
             "Bootstrap: Using %s:%s<0>" % (iface, ip),
             "NCCL version 2.31.2+cuda13.0"]
    if env.get("NCCL_NET_PLUGIN"):
        lines.append("NCCL_NET_PLUGIN set by environment to %s" % env["NCCL_NET_PLUGIN"])
    socket_lines = ["NET/Socket : Using [0]%s:%s<0>" % (iface, ip), "Initialized NET plugin Socket",
                    "Assigned NET plugin Socket to comm", "Using network Socket"]
    if env.get("NCCL_IB_DISABLE") == "1" or env.get("NCCL_NET") == "Socket":
        return lines + socket_lines
    hcas = [hca for hca in env.get("NCCL_IB_HCA", "").lstrip("=^").split(",") if hca]
    if env.get("NCCL_IB_DISABLE"):
        lines.append("NCCL_IB_DISABLE set by environment to %s." % env["NCCL_IB_DISABLE"])
    if hcas:
        lines.append("NCCL_IB_HCA set to %s" % ",".join(hcas))
    if can_use_rdma and hcas:
        devices = " ".join("[%d]%s:1/RoCE" % (index, hca) for index, hca in enumerate(hcas))
        return lines + ["NET/IB : Using %s [RO]; OOB %s:%s<0>" % (devices, iface, ip),
                        "Initialized NET plugin IB", "Assigned NET plugin IB to comm", "Using network IB"]
    return lines + ["NET/IB : No device found.", "NET/IB : Using [RO]; OOB %s:%s<0>" % (iface, ip),
                    "Failed to initialize NET plugin IB"] + socket_lines


def announce():
    """Print this rank's init lines, as NCCL does with NCCL_DEBUG=INFO."""
    if os.environ.get("NCCL_DEBUG", "").upper() != "INFO":
        return
    host, pid = socket.gethostname(), os.getpid()
    for line in init_lines(os.environ, _can_use_rdma(), host, pid, _address):
        print("%s:%d:%d [0] NCCL INFO %s" % (host, pid, pid, line))
    sys.stdout.flush()
