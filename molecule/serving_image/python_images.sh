#!/usr/bin/env bash
# Images with Python for the image check's cases (rules R1, N7), on the head of the scenario: the
# host's own python3 and the libraries it loads (about 50 MB), without Ray, vLLM or torch, each
# with the fixture kit's stand-in libnccl.so.2 (tests/sim/images/serving/libnccl_standin.c, built
# on the controller with the field's version codes) where the loader finds a system NCCL:
#   gb10-si-py:fit       NCCL 2.31.2, and pip's 2.29.7 beside it (nvidia/nccl/lib in site-packages)
#   gb10-si-py:old-nccl  NCCL 2.29.7, what the MiniMax M3 fork image ships
#   gb10-si-py:nccl-conf NCCL 2.31.2 and an /etc/nccl.conf that turns RoCE off
# Usage: python_images.sh DIR  (DIR holds libnccl-22907.so.2 and libnccl-23102.so.2)
set -euo pipefail
libs=$1
r=$(mktemp -d)
trap 'rm -rf "$r"' EXIT
mkdir -p "$r/usr/bin" "$r/usr/lib" "$r/usr/lib64" "$r/etc" "$r/tmp"
ln -s usr/lib "$r/lib"
ln -s usr/lib64 "$r/lib64"
cp -a /usr/lib/python3.11 "$r/usr/lib/"
cp -L /usr/bin/python3.11 "$r/usr/bin/python3.11"
ln -s python3.11 "$r/usr/bin/python3"
# The interpreter's libraries and its extension modules' (ctypes needs libffi), at their real paths
# (the host is usr-merged: /lib is usr/lib), with the path ldd names as a link where it differs.
for lib in $(ldd /usr/bin/python3.11 /usr/lib/python3.11/lib-dynload/*.so \
             | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\/lib64\// {print $1}' | sort -u); do
  real=$(readlink -f "$lib")
  mkdir -p "$r$(dirname "$real")"
  cp -L "$lib" "$r$real"
  if [ "$real" != "$lib" ] && [ ! -e "$r$lib" ]; then
    mkdir -p "$r$(dirname "$lib")"
    ln -s "$real" "$r$lib"
  fi
done
system=$r/usr/lib/$(uname -m)-linux-gnu
pip=$r/usr/local/lib/python3.11/dist-packages/nvidia/nccl/lib

image() {  # name: import the tree as it stands
  tar -C "$r" -c . | docker import - "$1" >/dev/null
}
cp "$libs/libnccl-23102.so.2" "$system/libnccl.so.2"
mkdir -p "$pip"
cp "$libs/libnccl-22907.so.2" "$pip/libnccl.so.2"
image gb10-si-py:fit
rm -rf "$r/usr/local/lib/python3.11"
printf '# baked into the image by its builder\nNCCL_IB_DISABLE=1\nNCCL_SOCKET_IFNAME=eth0\n' >"$r/etc/nccl.conf"
image gb10-si-py:nccl-conf
rm -f "$r/etc/nccl.conf"
cp "$libs/libnccl-22907.so.2" "$system/libnccl.so.2"
image gb10-si-py:old-nccl
