#!/bin/sh
# Test fixture: makes a ~36 MB image for a test host's own Docker engine (no registry can be
# reached) from the test host's files: dash, a few coreutils and Python 3.11, plus the files of
# an optional extra root tree. Usage: make_tiny_image.sh IMAGE_NAME [EXTRA_ROOT]
set -eu
name=$1
extra=${2:-}
if docker image inspect "$name" >/dev/null 2>&1; then
  echo "$name exists"
  exit 0
fi
l=usr/lib/x86_64-linux-gnu
cd /
# Debian bookworm is merged-/usr: bin, lib, lib64 are links into usr, copied as links.
set -- bin lib lib64 usr/lib64 usr/bin/sh usr/bin/dash usr/bin/python3 usr/bin/python3.11 \
  usr/bin/ln usr/bin/readlink usr/bin/sleep usr/bin/ls usr/bin/cat usr/lib/python3.11 \
  $l/ld-linux-x86-64.so.2 $l/libc.so.6 $l/libm.so.6 $l/libz.so.1* $l/libexpat.so.1* \
  $l/libselinux.so.1 $l/libpcre2-8.so.0*
if [ -n "$extra" ]; then
  tar -c "$@" -C "$extra" . | docker import - "$name" >/dev/null
else
  tar -c "$@" | docker import - "$name" >/dev/null
fi
echo "$name imported"
