#!/usr/bin/env bash
# Configures (once) and builds kforge with the CPU preset into build/.
#   scripts/build.sh            everything, tests included
#   scripts/build.sh TARGET...  only those targets (and what they need)
# Incremental: a second run only rebuilds what changed; ccache keeps object
# files across clean checkouts.
set -euo pipefail
cd "$(dirname "$0")/.."

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/kforge-ccache}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
# Paths relative to the checkout, and the build folder left out of the hash,
# so a clone at another path (CI's fresh clone) reuses the same objects.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
jobs="${KFORGE_JOBS:-$(nproc)}"

if [ ! -f build/build.ninja ]; then
  cmake --preset cpu
fi
# cmake 3.25 takes targets only after --target; a bare name is an error.
targets=()
if [ $# -gt 0 ]; then targets=(--target "$@"); fi
cmake --build build -j "$jobs" "${targets[@]}"
