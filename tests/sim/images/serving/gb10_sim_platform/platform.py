# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CPU platform with a Ray device key and a communicator for ranks on separate hosts (see the
package docstring)."""

from vllm.platforms.cpu import CpuPlatform

from gb10_sim_platform import gpu_ledger


class SimSparkCpuPlatform(CpuPlatform):
    """The CPU platform, placed by Ray like a GPU platform: one rank per simulated Spark."""

    ray_device_key: str = "GPU"

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return "gb10_sim_platform.communicator.CrossHostCpuCommunicator"

    @classmethod
    def get_attn_backend_cls(cls, *args, **kwargs):
        # A rank that builds its model's layers holds GPU memory on a Spark (its weights), whether or
        # not it joins a group: a data-parallel replica at TP=1 makes no communicator, and its
        # container killed under it leaks as a tensor-parallel rank's does (gpu_ledger.py, H4).
        gpu_ledger.hold()
        return super().get_attn_backend_cls(*args, **kwargs)
