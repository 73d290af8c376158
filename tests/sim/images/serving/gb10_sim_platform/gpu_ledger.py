# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A rank's hold on simulated GPU memory, for the simulated Spark's leak model (rule H4).

A rank on a Spark holds unified memory through the GPU driver; when its container is stopped or
killed under it, the driver can keep that memory until a reboot. The simulated Spark's "driver" is
the fixture kit's ``gb10-gpu-ledger`` (tests/fixtures/gb10-sim/bin/), which listens on an abstract
socket in the host's network namespace, which the Ray containers share (host networking). A rank
keeps one connection open for as long as it lives; the ledger decides, when it closes, whether the
memory was freed or leaked. It first says what it holds, "hold <gpu_memory_utilization>": a vLLM
engine on a GB10 preallocates that share of the pool at start and keeps it until it stops; the
ledger counts it against the simulated node's memory. Without a ledger (a Docker host that is not a
simulated Spark) a rank holds nothing.
"""

import socket

ADDRESS = "\0gb10-sim-gpu-ledger"
_held = []


def _utilization():
    """The engine's gpu_memory_utilization, from the config vLLM set for this rank's start."""
    try:
        from vllm.config import get_current_vllm_config
        return float(get_current_vllm_config().cache_config.gpu_memory_utilization)
    except Exception:  # no config set here: the ledger counts a share it cannot know as none
        return 0.0


def hold():
    """Open this process's hold once; the kernel closes it when the process ends, however it ends."""
    if _held:
        return
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(ADDRESS)
    except OSError:
        conn.close()
        return
    conn.sendall(("hold %r\n" % _utilization()).encode())
    _held.append(conn)
