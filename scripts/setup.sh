#!/usr/bin/env bash
# Sets up a controller from a checkout: a virtualenv with the locked Python packages (ansible,
# molecule, ansible-runner, ...) and the checkout linked as the collection gb10.serving.
# Idempotent and quick when already done. Usage: source <(scripts/setup.sh --env) or just run it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
py=${GB10_PYTHON:-python3}

stamp=.venv/.gb10-lock-$(sha256sum requirements.lock | cut -c1-12)
if [ ! -f "$stamp" ]; then
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -r requirements.lock
  rm -f .venv/.gb10-lock-*
  touch "$stamp"
fi

# The checkout is the collection: link it where collections_path (ansible.cfg) looks.
mkdir -p .collections/ansible_collections/gb10
ln -sfn "$top" .collections/ansible_collections/gb10/serving
