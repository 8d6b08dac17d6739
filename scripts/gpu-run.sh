#!/usr/bin/env bash
# Builds kforge with the cuda preset on the GPU machine and runs what needs
# a GPU: the verifier's GPU tests, the whole test suite, and the verifier
# benchmark. Logs go to $OUT (the device tool brings them back).
#   scripts/gpu-run.sh [build|gpu-test|test|bench|all]
# gpu-test: only the tests labelled gpu; test: every other test.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kforge-gpu-out}
mkdir -p "$out"
what=${1:-all}
eval "$(scripts/gpu-deps.sh)"
export KFORGE_KERNELBENCH_DIR="$PWD/.gpu-work/kernelbench"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

if [ "$what" = build ] || [ "$what" = all ]; then
  start=$(date +%s)
  cmake --preset cuda -DKFORGE_PYTHON="$(command -v python3)" > "$out/configure.log" 2>&1 \
    || { tail -40 "$out/configure.log"; exit 1; }
  grep -E "kforge:" "$out/configure.log"
  cmake --build build -j "$(nproc)" > "$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
fi

{ cat /proc/self/cgroup; grep cgroup /proc/self/mounts; } > "$out/cgroups.txt"

if [ "$what" = gpu-test ] || [ "$what" = all ]; then
  (cd build && ctest -L gpu --output-on-failure --timeout 600 > "$out/ctest-gpu.log" 2>&1)
  grep -E "tests passed|Passed|Failed|Skipped|\*\*\*" "$out/ctest-gpu.log" | sed 's/ \.\.\.*/ /' | tail -40
fi

if [ "$what" = test ] || [ "$what" = all ]; then
  (cd build && ctest -LE gpu -j 8 --output-on-failure --timeout 600 > "$out/ctest.log" 2>&1)
  grep -E "tests passed|Failed|\*\*\*" "$out/ctest.log" | sed 's/ \.\.\.*/ /' | tail -40
fi

if [ "$what" = bench ] || [ "$what" = all ]; then
  mkdir -p /tmp/kfbench/tasks /tmp/kfbench/candidates
  t=tests/data/verifier/triton
  cp tasks/kforge-mini/level1/1_ReLU.py /tmp/kfbench/tasks/relu.py
  cp tasks/kforge-mini/level1/3_RowSum.py /tmp/kfbench/tasks/row_sum.py
  cp tasks/kforge-mini/level1/4_RMSNorm.py /tmp/kfbench/tasks/rms_norm.py
  cp "$KFORGE_KERNELBENCH_DIR/level1/23_Softmax.py" /tmp/kfbench/tasks/kb_softmax.py
  cp "$KFORGE_KERNELBENCH_DIR/level1/19_ReLU.py" /tmp/kfbench/tasks/kb_relu.py
  for c in relu row_sum rms_norm kb_softmax; do cp "$t/$c.py" /tmp/kfbench/candidates/; done
  build/bin/kforge_verifier_bench --device cuda:0 --tasks /tmp/kfbench/tasks \
    --candidates /tmp/kfbench/candidates --count 48 --concurrency 4 --repeats 20 --timed kb_softmax \
    2>&1 | tee "$out/bench.txt"
fi
