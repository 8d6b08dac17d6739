#!/usr/bin/env bash
# On a GPU machine (Ubuntu + PyTorch, no gRPC): unpacks the Debian packages
# that ../shared/device/fetch-debs.sh (plus GoogleTest, OpenSSL, zlib and
# pkgconf) downloaded into .gpu-debs, into a prefix of our own, and prints
# the environment that builds and runs kforge against them:
#   eval "$(scripts/gpu-deps.sh)"
# Debian's CMake package files compute their prefix from their own location,
# so unpacked elsewhere they point at the right files; pkg-config files name
# /usr, which PKG_CONFIG_SYSROOT_DIR redirects.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${KFORGE_DEPS_PREFIX:-/opt/kdeps}
# Re-unpacked when the set of packages changes.
stamp="$prefix/.unpacked-$(ls .gpu-debs | md5sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  mkdir -p "$prefix"
  for deb in .gpu-debs/*.deb; do dpkg -x "$deb" "$prefix"; done
  touch "$stamp"
fi
lib="$prefix/usr/lib/x86_64-linux-gnu"
cat <<ENV
export KFORGE_DEPS_PREFIX='$prefix'
export PATH='$prefix/usr/bin':"\$PATH"$( [ -x /usr/local/cuda/bin/nvcc ] && echo ":/usr/local/cuda/bin")
export LD_LIBRARY_PATH='$lib':"\${LD_LIBRARY_PATH:-}"
export CMAKE_PREFIX_PATH='$prefix/usr:$lib/cmake'
export PKG_CONFIG_PATH='$lib/pkgconfig:$prefix/usr/share/pkgconfig'
export PKG_CONFIG_SYSROOT_DIR='$prefix'
export PKG_CONFIG_LIBDIR='$lib/pkgconfig:$prefix/usr/share/pkgconfig'
export NCCL_NVLS_ENABLE=0
ENV
