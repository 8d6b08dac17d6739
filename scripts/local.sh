#!/usr/bin/env bash
# The main command: installs what is missing, builds, and runs `kforge local`
# (learner, verifier and rollout worker on loopback). Extra arguments go to
# `kforge local`; Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup-debian.sh
scripts/build.sh kforge
exec build/bin/kforge local "$@"
