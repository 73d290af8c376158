#!/usr/bin/env bash
# Installs and starts what the test suite and the simulated cluster need on the controller
# machine (Debian/Ubuntu): the Docker engine, debootstrap for the local base image, rsync.
# Idempotent: does nothing that is already in place. Needs root (CI runs as root).
set -euo pipefail

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
if [ ${#need[@]} -gt 0 ]; then
  echo "host-deps: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Start an engine only when none answers (a desktop or CI machine may already run one).
if ! docker info >/dev/null 2>&1; then
  echo "host-deps: starting dockerd"
  mkdir -p /var/log
  nohup dockerd >/var/log/gb10-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { echo "host-deps: dockerd did not answer in 60 s, see /var/log/gb10-dockerd.log" >&2; exit 1; }
fi
