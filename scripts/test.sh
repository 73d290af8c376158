#!/usr/bin/env bash
# The whole test suite from a clean clone: installs what it needs (Python packages from PyPI,
# Debian's docker.io and debootstrap, a local test image), then runs, in order:
#   lint      ansible-lint, production profile
#   sanity    ansible-test sanity on a copy laid out as ansible_collections/gb10/serving
#   unit      pytest tests/unit (modules, module_utils, filters, callback)
#   molecule  every scenario under molecule/ (converge, idempotence, verify)
#   e2e       pytest tests/e2e on the simulated Spark cluster
# Usage: scripts/test.sh [stage ...]   (default: all stages)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(lint sanity unit molecule e2e)

scripts/setup.sh
export PATH="$top/.venv/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$top/.collections"
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0

needs_docker=0
for s in "${stages[@]}"; do case "$s" in molecule|e2e) needs_docker=1 ;; esac; done
if [ "$needs_docker" = 1 ]; then
  scripts/host-deps.sh
  GB10_TEST_IMAGE=$(tests/images/build_base.sh)
  export GB10_TEST_IMAGE
fi

run_lint() { ansible-lint --profile production; }

run_sanity() {
  # ansible-test needs the collection at .../ansible_collections/<namespace>/<name>; copy the
  # files git knows about (a symlink would resolve back to the checkout).
  local dest=/tmp/gb10-sanity/ansible_collections/gb10/serving
  rm -rf /tmp/gb10-sanity && mkdir -p "$dest"
  git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -C "$dest" -xf -
  (cd "$dest" && git init -q && git add -A && ansible-test sanity --venv --python 3.11 --requirements --color no)
}

run_unit() { python -m pytest -q tests/unit; }

run_molecule() {
  local scenario
  for scenario in molecule/*/; do
    scenario=$(basename "$scenario")
    echo "=== molecule test -s $scenario"
    molecule test -s "$scenario"
  done
}

run_e2e() {
  if [ -d tests/e2e ]; then python -m pytest -q -x tests/e2e; fi
}

for s in "${stages[@]}"; do
  echo "##### stage: $s"
  "run_$s"
done
echo "##### all stages passed: ${stages[*]}"
