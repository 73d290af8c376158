#!/usr/bin/env bash
# Sets up a controller from a checkout: a virtualenv with the locked Python packages (ansible,
# molecule, ansible-runner, ...) and the checkout linked as the collection gb10.serving.
# Idempotent and quick when already done. Usage: source <(scripts/setup.sh --env) or just run it.
#
# The virtualenv lives in this machine's cache, named after requirements.lock and the Python it
# runs on, and .venv links to it: a fresh clone on a machine that set up the same lock before
# (CI's clean clone, a second worktree) links it in a second instead of installing again
# (the test budget). GB10_VENV_CACHE moves the cache; deleting it only costs a reinstall.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
py=${GB10_PYTHON:-python3}
cache=${GB10_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gb10-serving/venvs}

key=$( { cat requirements.lock "$0"; "$py" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-12)
venv=$cache/controller-$key
mkdir -p "$cache"
# One installer at a time per venv: two checkouts set up at once wait for each other.
exec 9>"$venv.lock"
flock 9
if [ ! -f "$venv/.gb10-complete" ]; then
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip >/dev/null
  "$venv/bin/pip" install -q -r requirements.lock
  touch "$venv/.gb10-complete"
fi
exec 9>&-
# A .venv made in place by an earlier version of this script gives way to the link.
[ -L .venv ] || rm -rf .venv
ln -sfn "$venv" .venv

# The checkout is the collection: link it where collections_path (ansible.cfg) looks.
mkdir -p .collections/ansible_collections/gb10
ln -sfn "$top" .collections/ansible_collections/gb10/serving
