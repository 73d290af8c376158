#!/usr/bin/env bash
# Builds the local test-host image from Debian with debootstrap + `docker import`: no registry is
# reachable, so nothing is pulled. The tag carries a hash of this script and its package list, so a
# second run finds the image and returns at once. Prints the image tag on stdout.
#
# The image is the "host" of every molecule scenario and of the simulated Spark cluster: sshd and
# python3 for Ansible, docker.io so a test host can run its own engine (Docker-in-Docker, see
# tests/sim/README.md, "Test hosts that run their own Docker engine"), rsync for model_sync, kmod/procps for the host roles.
# netplan.io and python3-requests: a Spark has both from DGX OS (it configures its network with
# netplan; the community.docker modules need requests on the node), and each scenario that needs
# them spent 15-30 s installing them from Debian's mirror (the test budget). nftables: the
# firewall role's table (A4); Ubuntu 24.04 has it, and apt-get update on every simulated host costs time.
set -euo pipefail

suite=bookworm
packages=python3,python3-apt,openssh-server,iproute2,sudo,procps,kmod,ca-certificates,curl,rsync,docker.io,iptables,gnupg,less,iputils-ping,netcat-openbsd,dpkg-dev,netplan.io,python3-requests,nftables
hash=$(cat "$0" | sha256sum | cut -c1-12)
tag="gb10-test-host:${hash}"

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi

# Use the same Debian mirror that apt on this machine already uses.
mirror=$(grep -hoE 'https?://deb\.debian\.org/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | head -n1 || true)
mirror=${mirror:-http://deb.debian.org/debian}

work=$(mktemp -d /var/tmp/gb10-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "build_base: debootstrap $suite from $mirror (about a minute)" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

root=$work/rootfs
# sshd host keys are generated per container at start; allow root login with a key only.
rm -f "$root"/etc/ssh/ssh_host_*
mkdir -p "$root/run/sshd" "$root/root/.ssh"
chmod 700 "$root/root/.ssh"
cat >"$root/etc/ssh/sshd_config.d/gb10-test.conf" <<'CONF'
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
CONF
# The container's start command: host keys, then sshd in the foreground.
cat >"$root/usr/local/sbin/gb10-test-init" <<'INIT'
#!/bin/sh
ssh-keygen -A >/dev/null
# On a Spark /proc/sys is writable; Docker mounts it read-only in a container. Test hosts started
# with CAP_SYS_ADMIN get it back, so dropping the page cache (rule H3) is exercised for real.
mount -o remount,bind,rw /proc/sys 2>/dev/null || true
# A test host "boots" each time its container starts: record a boot identity that a simulated
# reboot changes (the kernel's boot_id does not change in a container).
cat /proc/sys/kernel/random/uuid > /run/gb10-boot-id
[ -x /usr/local/sbin/gb10-test-boot ] && /usr/local/sbin/gb10-test-boot
exec /usr/sbin/sshd -D -e
INIT
chmod 755 "$root/usr/local/sbin/gb10-test-init"
# Every Ansible module task ships its module and module_utils as a zip (AnsiballZ) that Python
# imports with zipimport, which never caches bytecode: each task compiles ansible.module_utils
# anew, 0.07 s of the 0.21 s of CPU a module run takes here (measured 2026-12-05), on the cores
# every test host shares with the controller (a Spark spends its own). A test host keeps that
# compiled code by the source's hash: a changed module compiles afresh, and an import gives the
# same code object, with this run's file name. Loaded at start by a .pth file; any error falls back
# to compiling.
pysite=$root/usr/local/lib/$(cd "$root/usr/lib" && ls -d python3.[0-9]* | head -n1)/dist-packages
mkdir -p "$pysite"
echo "import gb10_test_zipimport_cache" >"$pysite/gb10-test-zipimport-cache.pth"
cat >"$pysite/gb10_test_zipimport_cache.py" <<'PY'
"""Test hosts only (tests/images/build_base.sh): keep the code Python compiles from zip archives."""
import hashlib
import importlib.util
import marshal
import os
import types
import zipimport

_CACHE = "/var/cache/gb10-test-zipimport"
_compile_source = zipimport._compile_source


def _with_filename(code, filename):
    consts = tuple(_with_filename(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _cached_compile_source(pathname, source):
    try:
        path = os.path.join(_CACHE, hashlib.sha256(importlib.util.MAGIC_NUMBER + source).hexdigest())
        try:
            with open(path, "rb") as cached:
                return _with_filename(marshal.load(cached), pathname)
        except FileNotFoundError:
            pass
        code = _compile_source(pathname, source)
        os.makedirs(_CACHE, mode=0o700, exist_ok=True)
        partial = "%s.%d" % (path, os.getpid())
        with open(partial, "wb") as out:
            marshal.dump(code, out)
        os.replace(partial, path)
        return code
    except (OSError, ValueError, EOFError, TypeError):
        return _compile_source(pathname, source)


zipimport._compile_source = _cached_compile_source
PY
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

tar -C "$root" -c . | docker import \
  --change 'CMD ["/usr/local/sbin/gb10-test-init"]' \
  --change 'ENV LANG=C.UTF-8' - "$tag" >/dev/null
echo "$tag"
