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


def real(name):
    return P.load(name, RAW)


def sim(name):
    return P.load(name, RAW, SIM, 'sim-cpu')
