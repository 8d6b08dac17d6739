#!/usr/bin/env bash
# Builds kforge with the cuda preset on the GPU machine and runs what needs
# a GPU: the verifier's GPU tests, the whole test suite, and the verifier
# benchmark. Logs go to $OUT (the device tool brings them back).
#   scripts/gpu-run.sh [build|gpu-test|test|bench|model|rollout-bench|all]
# gpu-test: only the tests labelled gpu; test: every other test.
# model: builds only the model libraries' tests and the rollout benchmark,
# then runs them on the GPU, with transformers' logits as the reference.
# rollout-bench: kforge_rollout_bench against transformers' generate() on the
# same random Qwen2.5-Coder-shaped checkpoints (ROLLOUT_SHAPES, ROLLOUT_BATCHES,
# HF_FULL_BATCHES, HF_SHORT_BATCHES, HF_SHORT_TOKENS).
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

if [ "$what" = model ]; then
  start=$(date +%s)
  [ -f build/build.ninja ] || cmake --preset cuda -DKFORGE_PYTHON="$(command -v python3)" \
    > "$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
  grep -E "kforge:" "$out/configure.log"
  cmake --build build -j "$(nproc)" --target kforge_transformer_tests kforge_generation_tests \
    kforge_sampling_tests kforge_rollout_bench > "$out/build.log" 2>&1 \
    || { grep -E "error|Error" -A3 "$out/build.log" | head -60; exit 1; }
  echo "model build: $(( $(date +%s) - start )) s"
  python3 scripts/hf_reference_logits.py --suite /tmp/hfref > "$out/hfref.log" 2>&1 || tail -20 "$out/hfref.log"
  for t in transformer generation sampling; do
    KFORGE_HF_REFERENCE_DIR=/tmp/hfref build/bin/kforge_${t}_tests > "$out/$t-tests.log" 2>&1
    echo "kforge_${t}_tests: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "$out/$t-tests.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED|SKIPPED \]' "$out/$t-tests.log" | head -10
  done
fi

if [ "$what" = rollout-bench ]; then
  for shape in ${ROLLOUT_SHAPES:-qwen2.5-coder-1.5b}; do
    ckpt=/tmp/models/$shape
    [ -d "$ckpt" ] || python3 bench/hf_generate_bench.py --make "$shape" "$ckpt" 2>&1 | tail -2
    build/bin/kforge_rollout_bench --checkpoint "$ckpt" \
      --tokenizer tests/data/tokenizer/gpt2/tokenizer.json \
      --batches "${ROLLOUT_BATCHES:-1,16,64,256}" 2>&1 | tee -a "$out/rollout-bench.txt"
    # transformers takes ~0.1 s a step at any batch here: the full 1024-token
    # run only at HF_FULL_BATCHES, shorter runs (HF_SHORT_TOKENS) at the rest.
    python3 bench/hf_generate_bench.py --checkpoint "$ckpt" \
      --batches "${HF_FULL_BATCHES:-64}" 2>&1 | grep -v Warning | tee -a "$out/rollout-bench.txt"
    [ -z "${HF_SHORT_BATCHES:-}" ] || python3 bench/hf_generate_bench.py --checkpoint "$ckpt" \
      --batches "$HF_SHORT_BATCHES" --new-tokens "${HF_SHORT_TOKENS:-128}" 2>&1 \
      | grep -v Warning | tee -a "$out/rollout-bench.txt"
  done
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
