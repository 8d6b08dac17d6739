#!/usr/bin/env bash
# Prints the KernelBench problems folder (one holding level1/) that tests,
# benchmarks and `kforge eval` use, the first of:
#   1. $KFORGE_KERNELBENCH_DIR (when set, the only place looked at)
#   2. third_party/kernelbench/KernelBench (scripts/fetch-kernelbench.sh)
#   3. ../shared/kernelbench beside the checkout
# Exits 1, printing nothing, when there is none. The C++ side is
# common/paths/kernelbench_dir.h; keep the two in step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

if [ -n "${KFORGE_KERNELBENCH_DIR:-}" ]; then
  [ -d "$KFORGE_KERNELBENCH_DIR/level1" ] || exit 1
  (cd "$KFORGE_KERNELBENCH_DIR" && pwd)
  exit 0
fi
for dir in "$root/third_party/kernelbench/KernelBench" "$root/../shared/kernelbench"; do
  if [ -d "$dir/level1" ]; then
    (cd "$dir" && pwd)
    exit 0
  fi
done
exit 1
