#!/usr/bin/env bash
# Packs the build dependencies that a GPU machine with no package registry
# may lack, for perf/gpu-check.sh to use there:
#
#   bash perf/gpu-deps.sh        # on a Debian 12 machine with apt: writes .gpudeps/
#
# .gpudeps/ (git-ignored) holds the unpacked Debian packages of hwloc
# (headers, library, hwloc.pc), Catch2 v2 and pkgconf, libudev1 (which
# libhwloc needs) apart in .gpudeps/fallback/, and the toolkit's NCCL headers. Carry it to the GPU machine
# (the device tool's `carry: [".gpudeps"]`); gpu-check.sh puts it on the
# paths only for what that machine does not have itself.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest=$here/.gpudeps
rm -rf "$dest"
mkdir -p "$dest/debs" "$dest/fallback"
cd "$dest/debs"
apt-get download libhwloc15 libhwloc-dev catch2 pkgconf-bin libpkgconf3 libudev1
for f in *.deb; do
  case $f in
    libudev1_*) dpkg -x "$f" "$dest/fallback" ;;
    *) dpkg -x "$f" "$dest" ;;
  esac
done
# NCCL's header, for the shim (src/shim) where the GPU machine's toolkit has
# none: gpu-check.sh uses it only then.
mkdir -p "$dest/nccl"
cp -r /usr/local/cuda/include/nccl.h /usr/local/cuda/include/nccl_device.h \
  /usr/local/cuda/include/nccl_device "$dest/nccl/"
rm -rf "$dest/debs" "$dest/usr/share/doc" "$dest/usr/share/man" "$dest/fallback/usr/share"
# Links become copies (the device tool may carry files only).
find "$dest" -type l | while IFS= read -r l; do
  cp --remove-destination "$(readlink -f "$l")" "$l"
done
# hwloc.pc keeps prefix=/usr: gpu-check.sh points it at where .gpudeps lies.
du -sh "$dest"
