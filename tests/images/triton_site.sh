#!/usr/bin/env bash
# The real Triton that molecule/triton_ptxas asks which assembler it runs (rule H7): the
# manylinux x86_64 wheel of Triton 3.6.0 from PyPI, checked against its published SHA-256, unpacked
# once into a cache folder without what an assembler question never loads (the bundled CUDA tools
# and CUPTI, about 150 MB; the fixture puts its own stand-ins in bin/). Prints the folder that holds
# the package and its dist-info (Triton finds its backends through the dist-info's entry points);
# a second run finds it and returns at once.
set -euo pipefail

version=3.6.0
wheel=triton-3.6.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
sha256=e8e323d608e3a9bfcc2d9efcc90ceefb764a82b99dea12a86d643c72539ad5d3  # PyPI's published digest of that file
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gb10-serving/triton
site=$cache/$version/site
top=$(cd "$(dirname "$0")/../.." && pwd)

if [ -f "$site/.complete" ]; then
  echo "$site"
  exit 0
fi
mkdir -p "$cache"
if [ ! -f "$cache/$wheel" ] || ! echo "$sha256  $cache/$wheel" | sha256sum -c --quiet - 2>/dev/null; then
  echo "triton_site: downloading $wheel from PyPI (170 MB)" >&2
  rm -f "$cache/$wheel"
  "$top/.venv/bin/python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 -d "$cache" "triton==$version" >&2
fi
echo "$sha256  $cache/$wheel" | sha256sum -c --quiet - >&2
rm -rf "$site"
mkdir -p "$site"
"$top/.venv/bin/python" - "$cache/$wheel" "$site" <<'PY'
import sys, zipfile
skip = ("triton/backends/nvidia/bin/", "triton/backends/nvidia/lib/cupti/", "triton/backends/nvidia/include/")
with zipfile.ZipFile(sys.argv[1]) as wheel:
    wheel.extractall(sys.argv[2], [n for n in wheel.namelist() if not n.startswith(skip)])
PY
touch "$site/.complete"
echo "$site"
