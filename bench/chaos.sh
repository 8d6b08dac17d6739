#!/usr/bin/env bash
# The chaos benchmark: the chaos test (tests/integration/chaos_test.cc) run
# longer, with more kills. A `kforge local --serve` mesh runs a GRPO job on
# the tiny model while the learner, the verifier, the rollout worker and the
# verifier's harness processes are killed with SIGKILL at random moments;
# the job must succeed with every accepted sample in exactly one place of
# the learner's ledger, and nothing may outlive Ctrl-C. Prints the kill
# schedule's seed, each kill, the ledger and the wall time.
#
#   bench/chaos.sh [KILLS [STEPS [SEED]]]     # defaults: 20 kills, 40 steps
#   KFORGE_CHAOS_JOB=examples/local-job.json bench/chaos.sh 20 30
#                  # the default local job (warm start, then GRPO steps whose
#                  # candidates the harness runs), STEPS of its GRPO steps
#
# Needs a build (scripts/build.sh kforge_chaos_tests kforge kforge-learner
# kforge-verifier kforge-rollout).
set -euo pipefail
cd "$(dirname "$0")/.."
export KFORGE_CHAOS_KILLS="${1:-20}"
export KFORGE_CHAOS_STEPS="${2:-40}"
if [ $# -ge 3 ]; then export KFORGE_CHAOS_SEED="$3"; fi
start=$(date +%s)
build/bin/kforge_chaos_tests --gtest_color=no
echo "chaos: wall time $(( $(date +%s) - start )) s on $(nproc) cores"
