#!/usr/bin/env bash
# Prepares, on this Debian machine, what a GPU machine needs to build and test
# kforge, in two ignored folders that the device call carries:
#   .gpu-debs/  the C++ dependencies as .deb files (../shared/device/fetch-debs.sh
#               plus GoogleTest, OpenSSL, zlib and pkgconf), unpacked there by
#               scripts/gpu-deps.sh into a prefix of our own;
#   .gpu-work/  the KernelBench problems that GPU tests and benchmarks read
#               (copied from scripts/kernelbench-dir.sh's folder: ../shared
#               does not travel), and prof-debs/: libdw1 and libelf1, which
#               the Nsight Systems importer needs (gpu-run.sh decode with
#               DECODE_PROFILE=1), and kernelbench-repo/: KernelBench's own
#               tree at the pinned commit, the peer harness of gpu-run.sh
#               verifier-batch (when scripts/fetch-kernelbench.sh can get it).
# Idempotent: existing files are kept.
#   scripts/gpu-prepare.sh [SHARED_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${1:-../shared}

if [ -z "$(ls .gpu-debs/*.deb 2>/dev/null)" ]; then
  apt-get update -qq
  "$shared/device/fetch-debs.sh" .gpu-debs
  (cd .gpu-debs && apt-get download libprometheus-cpp-push1.0 libgtest-dev libgmock-dev googletest libssl-dev \
     zlib1g-dev pkgconf pkgconf-bin libpkgconf3 2>&1 | grep -v 'unsandboxed' || true)
fi
echo ".gpu-debs: $(ls .gpu-debs/*.deb | wc -l) packages, $(du -sh .gpu-debs | cut -f1)"

mkdir -p .gpu-work/kernelbench
kernelbench=$(scripts/kernelbench-dir.sh) || {
  echo "gpu-prepare: no KernelBench problems to pack (scripts/fetch-kernelbench.sh, or set KFORGE_KERNELBENCH_DIR)" >&2
  exit 1
}
for level in level1 level2; do
  [ -d ".gpu-work/kernelbench/$level" ] || cp -r "$kernelbench/$level" .gpu-work/kernelbench/
done

mkdir -p .gpu-work/prof-debs
if [ -z "$(ls .gpu-work/prof-debs/*.deb 2>/dev/null)" ]; then
  (cd .gpu-work/prof-debs && apt-get download libdw1 libelf1 2>&1 | grep -v 'unsandboxed' || true)
fi
# KernelBench's evaluator for bench/kernelbench_peer.py: the fetched copy if
# there is one, else a fetch (online, or from KFORGE_KERNELBENCH_GIT).
if [ ! -f .gpu-work/kernelbench-repo/src/kernelbench/eval.py ]; then
  if [ -f third_party/kernelbench/src/kernelbench/eval.py ]; then
    cp -r third_party/kernelbench .gpu-work/kernelbench-repo
  else
    scripts/fetch-kernelbench.sh .gpu-work/kernelbench-repo \
      || echo "gpu-prepare: no KernelBench tree for the peer harness (gpu-run.sh verifier-batch skips it)"
  fi
fi
echo ".gpu-work: $(du -sh .gpu-work | cut -f1)"
