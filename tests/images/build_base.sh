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
# them spent 15-30 s installing them from Debian's mirror (issue 28's test budget). nftables: the
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
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

tar -C "$root" -c . | docker import \
  --change 'CMD ["/usr/local/sbin/gb10-test-init"]' \
  --change 'ENV LANG=C.UTF-8' - "$tag" >/dev/null
echo "$tag"
