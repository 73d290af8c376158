#!/usr/bin/env bash
# Installs and starts what the test suite and the simulated cluster need on the controller
# machine (Debian/Ubuntu): the Docker engine, debootstrap for the local base image, rsync, gcc, and
# Prometheus (the e2e suite scrapes the simulated cluster with a real one, rule O6).
# Idempotent: does nothing that is already in place. Needs root (CI runs as root).
set -euo pipefail

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
# The tests of role serving_image build stand-in NCCL libraries (tests/sim/images/serving/libnccl_standin.c).
command -v gcc >/dev/null 2>&1 || need+=(gcc)
# scripts/test.sh stops the other lanes' processes when one fails (pgrep finds them).
command -v pgrep >/dev/null 2>&1 || need+=(procps)
if [ ${#need[@]} -gt 0 ]; then
  echo "host-deps: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Only the prometheus binary is wanted: the e2e test runs its own, on loopback, with the
# configuration the deploy writes. The package's service is not started (a policy-rc.d that
# refuses every start, for the install only, where none is in place).
if ! command -v prometheus >/dev/null 2>&1; then
  echo "host-deps: installing prometheus (its service not started)"
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
  fi
  apt-get update -qq
  rc=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null || rc=$?
  [ -z "$policy" ] || rm -f "$policy"
  [ "$rc" = 0 ] || { echo "host-deps: apt-get install prometheus failed (exit $rc)" >&2; exit "$rc"; }
fi

# Start an engine only when none answers (a desktop or CI machine may already run one).
if ! docker info >/dev/null 2>&1; then
  # A dockerd killed with its machine (a CI machine recycled mid-run) leaves its pid files; when
  # the recorded pid now belongs to another process, dockerd refuses to start ("pid file found").
  # A pid file whose process is not a dockerd/containerd is stale and removed.
  for pidfile in /var/run/docker.pid /var/run/docker/containerd/containerd.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile" 2>/dev/null || true)
    comm=$(cat "/proc/${pid:-0}/comm" 2>/dev/null || true)
    case "$comm" in
      dockerd|containerd) ;;
      *) echo "host-deps: removing the stale $pidfile (pid ${pid:-none} is not running a Docker daemon)"
         rm -f "$pidfile" ;;
    esac
  done
  echo "host-deps: starting dockerd"
  mkdir -p /var/log
  nohup dockerd >/var/log/gb10-dockerd.log 2>&1 &
  dockerd_pid=$!
  # Restoring containers that an earlier run left behind comes before the API answers: up to
  # 180 s, and no longer once dockerd itself has exited.
  for _ in $(seq 1 180); do
    docker info >/dev/null 2>&1 && break
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    echo "host-deps: dockerd did not answer (see /var/log/gb10-dockerd.log); its last lines:" >&2
    tail -n 25 /var/log/gb10-dockerd.log >&2 || true
    exit 1
  fi
fi
