#!/usr/bin/env bash
# Makes the tiny model of the simulated cluster (make_tiny_model.py, run inside the serving image,
# which has torch/transformers/tokenizers) and prints the folder it lies in:
# .cache/sim/model-<hash>/, the hash taken over the recipe and the serving image tag, so a second
# run returns at once. Usage: build_model.sh [serving image tag]  (default: build_serving.sh's)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
image=${1:-$("$top/tests/sim/images/build_serving.sh")}
hash=$( { echo "$image"; cat "$0" "$here/make_tiny_model.py" "$here/corpus.txt"; } | sha256sum | cut -c1-12)
out=$top/.cache/sim/model-$hash

if [ -f "$out/.complete" ]; then
  echo "$out"
  exit 0
fi
rm -rf "$out"
mkdir -p "$out"
echo "build_model: making the tiny model in $out" >&2
docker run --rm --label gb10.sim=model-build --network none \
  -v "$here:/src:ro" -v "$out:/out" --entrypoint python "$image" \
  /src/make_tiny_model.py /src/corpus.txt /out >&2
touch "$out/.complete"
echo "$out"
