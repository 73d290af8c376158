"""Read the collection's real profiles and overlay for the profile/render/fit tests."""
import os

import yaml

from ansible_collections.gb10.serving.plugins.lookup.profile import read_profiles
from ansible_collections.gb10.serving.plugins.module_utils import profile as P

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PROFILES_DIR = os.path.join(TOP, 'profiles')
RAW = read_profiles(PROFILES_DIR)
with open(os.path.join(PROFILES_DIR, 'overlays', 'sim-cpu.yml')) as _f:
    SIM = yaml.safe_load(_f)
# Profiles the simulation cannot run, each with what refuses it (test_profile shows the refusal):
# the tiny model has 2 layers, and a stage holds whole layers. A third layer would not make PP=3 run
# there: tried on the simulated mesh on 2026-12-04 with a 3-layer tiny model, the three ranks came up
# (NCCL's stand-in on every rank, the API serving) and the first request failed on PP rank 1 inside
# vLLM 0.32's CPU build (`AssertionError` at `self.intermediate_tensors is not None` in
# GPUModelRunner.sync_and_gather_intermediate_tensors, from execute_model's _preprocess: the CPU
# model runner never allocates the tensors a later stage receives into) while rank 0 waited.
# The tiny model is dense, and vLLM refuses expert parallelism for a model without experts. A tiny MoE
# would not make DP=3 with EP run there either: tried on 2026-12-04 with a 6-expert Mixtral-shaped tiny
# model and three containers of the simulation image (DP=3, one engine each, headless on two), the
# engines came up with 2 of the 6 experts each (EP ranks 0-2) and the first request failed in every
# engine inside vLLM 0.32's CPU build: the MoE dispatch (AgRsAll2AllManager, the one all2all manager
# the CPU communicator allows) calls all_gatherv, which CpuCommunicator does not implement
# (`NotImplementedError` in base_device_communicator.all_gatherv). DP=3 without EP on the dense tiny
# model serves there (each engine a whole replica).
SIM_REFUSED = {'minimax-m27-nvfp4-pp3': "pipeline_parallel_size: must not exceed the model's 2 layers",
               'minimax-m27-nvfp4-dp3ep': 'engine_args.enable-expert-parallel: needs a model with routed experts'}
SIMULATED = sorted(set(RAW) - set(SIM_REFUSED))


def real(name):
    return P.load(name, RAW)


def sim(name):
    return P.load(name, RAW, SIM, 'sim-cpu')
