#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test.
# README.md and .ci/run use exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup-debian.sh
scripts/build.sh
cd build
ctest -j "${KFORGE_JOBS:-$(nproc)}" --output-on-failure --timeout 600
