#!/bin/sh
# Test fixture (rule H1): builds a local apt repository of tiny packages named like the real
# NVIDIA driver packages, in three versions, so the nvidia_driver role's apt pin and dpkg holds
# are exercised by the real apt resolver:
#   580.95.05, 580.142  branch-named packages (nvidia-driver-580-open, libnvidia-compute-580,
#                       nvidia-utils-580, nvidia-dkms-580-open) and the CUDA repository's
#                       branch-less metapackage nvidia-open
#   590.44.01           the renamed 590 packages (branch suffix dropped: nvidia-driver-open,
#                       libnvidia-compute, nvidia-utils, nvidia-dkms-open) and nvidia-open 590:
#                       what `apt upgrade` would pull in on an unpinned node
#   DGX OS's packaging: the driver's kernel modules prebuilt per kernel,
#   linux-modules-nvidia-580-open-<kernel> (its version the kernel's + the driver's, its module at
#   /lib/modules/<kernel>/kernel/nvidia-580-open/nvidia.ko with the driver's version in its
#   .modinfo strings), each needing the nvidia-kernel-common-580 of its driver build; kernels
#   linux-image-<kernel> (/boot/vmlinuz-<kernel>); and the kernel metapackage linux-nvidia: 1 is
#   6.11.0-1016-nvidia with 580.95.05, 2 (the "OTA") 6.17.0-1008-nvidia with 580.142, both kernels'
#   module packages rebuilt for 580.142. 6.17.0-1010-nvidia has no module package at all.
# nvidia-utils* ship a fake /usr/bin/nvidia-smi that prints its own driver version, as the real
# one prints the loaded driver's. Usage: build_fake_driver_repo.sh REPO_DIR
set -eu
repo=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$repo"

# pkg NAME VERSION DEPENDS CONFLICTS
pkg() {
  name=$1 version=$2 depends=$3 conflicts=$4
  dir=$work/$name-$version
  mkdir -p "$dir/DEBIAN"
  {
    echo "Package: $name"
    echo "Version: $version"
    echo "Architecture: all"
    echo "Maintainer: gb10.serving tests <tests@gb10.invalid>"
    [ -z "$depends" ] || echo "Depends: $depends"
    [ -z "$conflicts" ] || { echo "Conflicts: $conflicts"; echo "Replaces: $conflicts"; }
    echo "Description: test fixture named like the NVIDIA driver package $name"
  } >"$dir/DEBIAN/control"
  case $name in
    nvidia-utils*)
      upstream=${version%%-*}
      mkdir -p "$dir/usr/bin"
      cat >"$dir/usr/bin/nvidia-smi" <<SMI
#!/bin/sh
# fake nvidia-smi from the test package $name $version
case "\$*" in
  *--query-gpu=driver_version*) echo "$upstream" ;;
  *) echo "NVIDIA-SMI $upstream  Driver Version: $upstream  (test fixture)" ;;
esac
SMI
      chmod 755 "$dir/usr/bin/nvidia-smi"
      ;;
    linux-image-*)
      mkdir -p "$dir/boot"
      echo "test fixture kernel ${name#linux-image-}" >"$dir/boot/vmlinuz-${name#linux-image-}"
      ;;
    linux-modules-nvidia-*)
      kernel=${name#linux-modules-nvidia-580-open-} driver=${version#*+}
      mkdir -p "$dir/lib/modules/$kernel/kernel/nvidia-580-open"
      printf '\177ELF test fixture\000license=Dual MIT/GPL\000version=%s\000' "$driver" \
        >"$dir/lib/modules/$kernel/kernel/nvidia-580-open/nvidia.ko"
      ;;
  esac
  dpkg-deb --root-owner-group --build "$dir" "$repo/${name}_${version}_all.deb" >/dev/null
}

for v in 580.95.05-0ubuntu1 580.142-0ubuntu1; do
  pkg libnvidia-compute-580 "$v" "" ""
  pkg nvidia-kernel-common-580 "$v" "" ""
  pkg nvidia-dkms-580-open "$v" "nvidia-kernel-common-580 (= $v)" ""
  pkg nvidia-utils-580 "$v" "libnvidia-compute-580 (= $v)" ""
  pkg nvidia-driver-580-open "$v" "libnvidia-compute-580 (= $v), nvidia-utils-580 (= $v), nvidia-kernel-common-580 (= $v)" ""
  pkg nvidia-open "$v" "nvidia-driver-580-open (= $v), nvidia-dkms-580-open (= $v)" ""
done
# kernel, its package version
for kv in 6.11.0-1016-nvidia:6.11.0-1016.16 6.17.0-1008-nvidia:6.17.0-1008.8 6.17.0-1010-nvidia:6.17.0-1010.10; do
  pkg "linux-image-${kv%%:*}" "${kv#*:}" "" ""
done
# kernel, its package version, driver build
for kvd in 6.11.0-1016-nvidia:6.11.0-1016.16:580.95.05 6.11.0-1016-nvidia:6.11.0-1016.16:580.142 \
           6.17.0-1008-nvidia:6.17.0-1008.8:580.142; do
  k=${kvd%%:*} rest=${kvd#*:}
  pkg "linux-modules-nvidia-580-open-$k" "${rest%%:*}+${rest#*:}" \
    "linux-image-$k, nvidia-kernel-common-580 (= ${rest#*:}-0ubuntu1)" ""
done
pkg linux-nvidia 1 "linux-image-6.11.0-1016-nvidia, linux-modules-nvidia-580-open-6.11.0-1016-nvidia" ""
pkg linux-nvidia 2 "linux-image-6.17.0-1008-nvidia, linux-modules-nvidia-580-open-6.17.0-1008-nvidia" ""
v=590.44.01-0ubuntu1
pkg libnvidia-compute "$v" "" "libnvidia-compute-580"
pkg nvidia-dkms-open "$v" "" "nvidia-dkms-580-open"
pkg nvidia-utils "$v" "libnvidia-compute (= $v)" "nvidia-utils-580"
pkg nvidia-driver-open "$v" "libnvidia-compute (= $v), nvidia-utils (= $v), nvidia-dkms-open (= $v)" "nvidia-driver-580-open"
pkg nvidia-open "$v" "nvidia-driver-open (= $v)" ""

cd "$repo"
dpkg-scanpackages --multiversion . /dev/null >Packages 2>/dev/null
echo "built $(ls "$repo"/*.deb | wc -l) packages in $repo"
