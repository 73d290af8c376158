#!/usr/bin/env bash
# Builds the image of a simulated Spark (host/Dockerfile: the local test-host image + the GB10
# fixture kit + its own Docker engine at start) and prints its tag. The tag is a hash of the recipe
# and of the kit, so a second run returns at once. No registry: the base is built locally.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
kit=$top/tests/fixtures/gb10-sim
[ -x "$kit/install.sh" ] || { echo "build_host: the GB10 fixture kit is missing at $kit" >&2; exit 1; }

base=$("$top/tests/images/build_base.sh")
hash=$( { echo "$base"; cat "$0"; for d in "$here/host" "$kit"; do (cd "$d" && find . -type f | LC_ALL=C sort | xargs cat); done; } \
  | sha256sum | cut -c1-12)
tag="gb10-sim-host:${hash}"
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi

ctx=$(mktemp -d /var/tmp/gb10-sim-host.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cp -a "$here/host/." "$ctx/"
cp -a "$kit" "$ctx/gb10-sim"
echo "build_host: building $tag" >&2
docker build -q --build-arg "BASE=$base" --label gb10.sim=host-image -t "$tag" "$ctx" >&2
echo "$tag"
