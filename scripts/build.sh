#!/usr/bin/env bash
# Configures (once) and builds kforge with the CPU preset into build/.
# Incremental: a second run only rebuilds what changed; ccache keeps object
# files across clean checkouts.
set -euo pipefail
cd "$(dirname "$0")/.."

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/kforge-ccache}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
jobs="${KFORGE_JOBS:-$(nproc)}"

if [ ! -f build/build.ninja ]; then
  cmake --preset cpu
fi
cmake --build build -j "$jobs" "$@"
