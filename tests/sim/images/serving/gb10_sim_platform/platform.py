# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CPU platform with a Ray device key and a communicator for ranks on separate hosts (see the
package docstring)."""

from vllm.platforms.cpu import CpuPlatform


class SimSparkCpuPlatform(CpuPlatform):
    """The CPU platform, placed by Ray like a GPU platform: one rank per simulated Spark."""

    ray_device_key: str = "GPU"

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return "gb10_sim_platform.communicator.CrossHostCpuCommunicator"
