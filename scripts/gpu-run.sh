#!/usr/bin/env bash
# Builds kforge with the cuda preset on the GPU machine and runs what needs
# a GPU: the verifier's GPU tests, the whole test suite, and the verifier
# benchmark. Logs go to $OUT (the device tool brings them back).
#   scripts/gpu-run.sh [build|gpu-test|test|bench|verifier|verifier-corpus|verifier-batch|e2e|e2e-pair|e2e-warm-up|mesh|model|rollout-bench|train|all]
# e2e: the mesh at real scale (scripts/e2e_job.py); see that mode.
# e2e-pair: that job synchronous and asynchronous side by side, half the GPUs each.
# e2e-warm-up: that job with verifier warm-ups, then without, on all the GPUs.
# gpu-test: only the tests labelled gpu; test: every other test.
# model: builds only the model libraries' tests and the rollout benchmark,
# then runs them on the GPU, with transformers' logits as the reference.
# rollout: the CUDA-graph decode tests and benchmark (see that mode).
# rollout-bench: kforge_rollout_bench against transformers' generate() on the
# same random Qwen2.5-Coder-shaped checkpoints (ROLLOUT_SHAPES, ROLLOUT_BATCHES,
# HF_FULL_BATCHES, HF_SHORT_BATCHES, HF_SHORT_TOKENS).
# verifier-corpus: builds the verifier and its GPU tests, then verifies every
# solution of tasks/kernelbench-solutions on its task (sharded over the GPUs,
# one test process per GPU) and the GPU attack tests; corpus.txt has a line
# per solution. CORPUS_FILTER narrows the solutions (a gtest filter, default
# 'KernelBench/*'); CORPUS_ONLY=true skips the attack tests after them.
# verifier-batch: the GRPO-shaped batch (bench/make_grpo_batch.py) through
# kforge_verifier_batch_bench on 1 GPU and, with two, on 2 (BATCH_GPU_COUNTS),
# with the timing-spread run; KernelBench's harness (bench/kernelbench_peer.py,
# .gpu-work/kernelbench-repo from scripts/fetch-kernelbench.sh) on the same
# batch afterwards on every GPU, for PEER_SECONDS (default 240; 0 skips it);
# then bench/compare_batch.py. Each part is capped so the call ends in time.
# BATCH_LAUNCH_COVER_MS and CV_LAUNCH_COVER_MS (a list: one spread run each)
# set TimingProtocol.launch_cover_ms; BATCH_TASK_AFFINITY=false hands each
# candidate to the least busy GPU instead of its task's; BATCH_WARM=false turns
# MultiInputOptions.warm_variant_sets off; ALONE=false skips the run of one
# correct candidate of each level-1 task alone after the batch; BATCH_SPARES
# sets the sandboxes kept ready (default 4); BATCH_TAG suffixes the output files;
# BATCH_OVERLAP=false runs the batch with MultiInputOptions.overlap_warm_up off;
# ALONE_OVERLAP (default true,false) runs the one-at-a-time part once per value,
# each candidate ALONE_REPEATS times in a row (default 2, figures from the last);
# BATCH_LAUNCHERS sets FunnelConfig.triton_launchers (0: none built ahead).
# verifier: builds only the verifier, its GPU tests and benchmark, then runs
# the GPU verifier tests (VERIFIER_TEST_FILTER) and the benchmark
# (VERIFIER_BENCH_ARGS are appended to the bench mode's flags).
# mesh: builds the four binaries, runs a short `kforge local` job with Triton
# candidates and a held-out task (curves.svg), then `kforge eval` of the
# built-in Triton solutions on cuda:0 with its plots.
# weights: the NCCL weight broadcast: kforge_nccl_tests (its two-GPU tests
# skip on one GPU), the flat-parameter and broadcaster tests, a short
# `kforge local` job (on two GPUs its rollout worker is on cuda:1 and in the
# learner's group; on one it shares the learner's GPU and is told it stays
# out), and with two GPUs kforge_weight_broadcast_bench (BROADCAST_SHAPES).
# decode: the sampling path's kernels and the decode step: builds the model
# tests and the rollout benchmark, runs the kernel, transformer (against
# transformers' logits), generation and sampling tests on the GPU, then
# kforge_rollout_bench at ROLLOUT_BATCHES (default 1,64) and, with
# DECODE_PROFILE=1, an nsys kernel summary of batch 64 (decode-kernels.csv).
# train: the learner on the GPU (trainer tests, the built-in Triton
# solutions, a short `kforge local` job with Triton candidates) and
# kforge_train_bench against bench/train_bench_torch.py.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kforge-gpu-out}
mkdir -p "$out"
what=${1:-all}
eval "$(scripts/gpu-deps.sh)"
export KFORGE_KERNELBENCH_DIR="$PWD/.gpu-work/kernelbench"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

# Configures build/ with the cuda preset unless this (warm) machine already
# has, and says what the configure step enabled.
configure() {
  if [ ! -f build/build.ninja ]; then
    cmake --preset cuda -DKFORGE_PYTHON="$(command -v python3)" > "$out/configure.log" 2>&1 \
      || { tail -40 "$out/configure.log"; exit 1; }
  fi
  if [ -f "$out/configure.log" ]; then grep -E "kforge:" "$out/configure.log"; fi
}

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
  configure
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

if [ "$what" = decode ]; then
  start=$(date +%s)
  configure
  cmake --build build -j "$(nproc)" --target kforge_kernel_tests kforge_transformer_tests \
    kforge_generation_tests kforge_sampling_tests kforge_rollout_bench > "$out/build.log" 2>&1 \
    || { grep -E "error|Error" -A3 "$out/build.log" | head -60; exit 1; }
  echo "decode build: $(( $(date +%s) - start )) s"
  python3 scripts/hf_reference_logits.py --suite /tmp/hfref > "$out/hfref.log" 2>&1 || tail -20 "$out/hfref.log"
  for t in kernel transformer generation sampling; do
    KFORGE_HF_REFERENCE_DIR=/tmp/hfref build/bin/kforge_${t}_tests > "$out/$t-tests.log" 2>&1
    echo "kforge_${t}_tests: exit $?; $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/$t-tests.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED|SKIPPED \]' "$out/$t-tests.log" | head -10
    grep -B2 -A10 "Failure" "$out/$t-tests.log" | head -30
  done
  ckpt=/tmp/models/qwen2.5-coder-1.5b
  [ -d "$ckpt" ] || python3 bench/hf_generate_bench.py --make qwen2.5-coder-1.5b "$ckpt" 2>&1 | tail -1
  build/bin/kforge_rollout_bench --checkpoint "$ckpt" --tokenizer tests/data/tokenizer/gpt2/tokenizer.json \
    --batches "${ROLLOUT_BATCHES:-1,64}" 2>&1 | tee -a "$out/rollout-bench.txt"
  if [ -n "${DECODE_PROFILE:-}" ]; then
    # Nsight Systems ships inside Nsight Compute there; its importer needs
    # libdw1 and libelf1 (Debian packages that scripts/gpu-prepare.sh fetched
    # into .gpu-work/prof-debs).
    nsys=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | head -1)
    mkdir -p /tmp/dw && for deb in .gpu-work/prof-debs/*.deb; do dpkg -x "$deb" /tmp/dw; done
    LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH "$nsys" profile \
      --cuda-graph-trace=node -o /tmp/decode -f true build/bin/kforge_rollout_bench \
      --checkpoint "$ckpt" --tokenizer tests/data/tokenizer/gpt2/tokenizer.json --batches 64 \
      --new_tokens 128 > "$out/nsys.log" 2>&1 || tail -5 "$out/nsys.log"
    LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH "$nsys" stats \
      --report cuda_gpu_kern_sum --format csv -o /tmp/decode-kern /tmp/decode.nsys-rep > /dev/null 2>&1
    cp /tmp/decode-kern*.csv "$out/decode-kernels.csv" 2>/dev/null && head -30 "$out/decode-kernels.csv" | cut -c1-220
  fi
fi

if [ "$what" = train ]; then
  # The learner on the GPU: trainer tests (bf16 on cuda:0), the built-in
  # Triton solutions through the funnel, a short `kforge local` job with
  # Triton candidates, and the training benchmark against PyTorch.
  start=$(date +%s)
  configure
  cmake --build build -j "$(nproc)" --target kforge kforge-learner kforge-rollout kforge-verifier \
    kforge_training_tests kforge_verifier_gpu_tests kforge_train_bench kforge_verifier_bench \
    > "$out/build.log" 2>&1 \
    || { grep -E "error|Error" -A3 "$out/build.log" | head -60; exit 1; }
  echo "train build: $(( $(date +%s) - start )) s"
  build/bin/kforge_training_tests > "$out/training-tests.log" 2>&1
  echo "kforge_training_tests: exit $?; $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/training-tests.log" | tr '\n' ' ')"
  grep -E '^\[       OK \].*Gpu|^\[  FAILED' "$out/training-tests.log" | head
  build/bin/kforge_verifier_gpu_tests --gtest_filter='*solutions_*' > "$out/verifier-gpu.log" 2>&1
  echo "builtin Triton solutions: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "$out/verifier-gpu.log" | tr '\n' ' ')"
  cat > /tmp/gpu-job.json <<'JOB'
{"tasks": {"builtin": "kforge-mini"}, "warm_start_steps": 3, "total_steps": 3,
 "prompts_per_step": 2, "grpo": {"group_size": 4}, "sampling": {"max_new_tokens": 200},
 "sft": {"learning_rate": 0.01}, "optimizer": {"batch_size": 8, "micro_batch_size": 4},
 "verifier": {"timing": {"trials": 10}}, "checkpoint": {"every_steps": 3}}
JOB
  timeout 300 build/bin/kforge local --learner_port=0 --run_dir=/tmp/gpu-local --job=/tmp/gpu-job.json \
    > "$out/local-gpu.log" 2>&1
  echo "kforge local on the GPU: exit $?"; tail -14 "$out/local-gpu.log"
  grep -h "python ready\|funnel ready" /tmp/gpu-local/verifier-0.log | cut -c1-200
  ckpt=/tmp/models/qwen2.5-coder-1.5b
  [ -d "$ckpt" ] || python3 bench/hf_generate_bench.py --make qwen2.5-coder-1.5b "$ckpt" 2>&1 | tail -1
  # TRAIN_BENCH_ARGS: variants separated by ';'.
  IFS=';' read -ra variants <<< "${TRAIN_BENCH_ARGS:---sequences 16 --micro 8}"
  for args in "${variants[@]}"; do
    build/bin/kforge_train_bench --checkpoint "$ckpt" $args --prompt_tokens 512 \
      --completion_tokens 512 --steps 5 2>&1 | tee -a "$out/train-bench.txt"
    python3 bench/train_bench_torch.py --checkpoint "$ckpt" ${args//_/-} --prompt-tokens 512 \
      --completion-tokens 512 --steps 5 2>&1 | grep -v Warning | tee -a "$out/train-bench.txt"
  done
fi

if [ "$what" = weights ]; then
  export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off (../shared/device/NOTES.md)
  start=$(date +%s)
  configure
  cmake --build build -j "$(nproc)" --target kforge kforge-learner kforge-rollout kforge-verifier \
    kforge_unit_tests kforge_weights_tests kforge_nccl_tests kforge_weight_broadcast_bench \
    > "$out/build.log" 2>&1 || { grep -E "error|Error" -A3 "$out/build.log" | head -60; exit 1; }
  echo "weights build: $(( $(date +%s) - start )) s"
  nvidia-smi topo -m > "$out/topo.txt" 2>&1
  for t in nccl weights; do
    build/bin/kforge_${t}_tests > "$out/$t-tests.log" 2>&1
    echo "kforge_${t}_tests: exit $?; $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/$t-tests.log" | tr '\n' ' ')"
    grep -E '^\[       OK|^\[  FAILED|Skipped$' -A1 "$out/$t-tests.log" | grep -v "^--" | head -24
  done
  build/bin/kforge_unit_tests --gtest_filter='*Broadcast*' > "$out/broadcaster-tests.log" 2>&1
  echo "broadcaster tests: exit $?; $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/broadcaster-tests.log" | tr '\n' ' ')"
  cat > /tmp/gpu-job.json <<'JOB'
{"tasks": {"builtin": "kforge-mini"}, "warm_start_steps": 2, "total_steps": 3,
 "prompts_per_step": 2, "grpo": {"group_size": 4}, "sampling": {"max_new_tokens": 200},
 "sft": {"learning_rate": 0.01}, "optimizer": {"batch_size": 8, "micro_batch_size": 4},
 "verifier": {"timing": {"trials": 10}}, "checkpoint": {"every_steps": 5}}
JOB
  timeout 300 build/bin/kforge local --learner_port=0 --run_dir=/tmp/gpu-local --job=/tmp/gpu-job.json \
    > "$out/local-gpu.log" 2>&1
  echo "kforge local on the GPU: exit $?"; tail -8 "$out/local-gpu.log"
  cp /tmp/gpu-local/learner.log "$out/local-learner.log"; cp /tmp/gpu-local/rollout-0.log "$out/local-rollout.log"
  grep -hE "broadcast|flat buffers|weights applied|not in the" /tmp/gpu-local/learner.log /tmp/gpu-local/rollout-0.log \
    | cut -c1-330 | head -24
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    build/bin/kforge_weight_broadcast_bench --shapes "${BROADCAST_SHAPES:-1.5b,3b}" 2>&1 \
      | tee "$out/broadcast-bench.txt"
  fi
fi

if [ "$what" = rollout ]; then
  # The CUDA-graph decode path: the link-order check, the generation tests
  # (graph replay against eager steps), then kforge_rollout_bench with graphs
  # at every batch size and, side by side in the same run, eager steps and
  # transformers' generate() at ROLLOUT_COMPARE_BATCH.
  start=$(date +%s)
  configure
  cmake --build build -j "$(nproc)" --target kforge kforge-learner kforge-rollout kforge-verifier \
    kforge_unit_tests kforge_generation_tests kforge_rollout_bench > "$out/build.log" 2>&1 \
    || { grep -E "error|Error" -A3 "$out/build.log" | head -60; exit 1; }
  echo "rollout build: $(( $(date +%s) - start )) s"
  echo "kforge NEEDED: $(readelf -d build/bin/kforge | grep -m3 NEEDED | sed 's/.*\[//; s/\]//' | tr '\n' ' ')"
  { readelf -d build/bin/kforge | grep -E "NEEDED|RUNPATH"; command -v g++ c++; c++ --version | head -1
    grep -A4 "build bin/kforge:" build/build.ninja | grep -E "LINK_FLAGS|LINK_LIBRARIES" | cut -c1-600
  } > "$out/link.txt" 2>&1
  build/bin/kforge_unit_tests --gtest_filter='StdLibraryBinding*' > "$out/binding.log" 2>&1
  echo "binding test: exit $?"; grep -E "resolves to|PASSED|FAILED" "$out/binding.log" | head -5
  build/bin/kforge_generation_tests > "$out/generation-tests.log" 2>&1
  echo "kforge_generation_tests: exit $?; $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/generation-tests.log" | tr '\n' ' ')"
  grep -B3 -A12 "Failure" "$out/generation-tests.log" | head -40
  ckpt=/tmp/models/qwen2.5-coder-1.5b
  [ -d "$ckpt" ] || python3 bench/hf_generate_bench.py --make qwen2.5-coder-1.5b "$ckpt" 2>&1 | tail -1
  cmp=${ROLLOUT_COMPARE_BATCH:-64}
  build/bin/kforge_rollout_bench --checkpoint "$ckpt" --tokenizer tests/data/tokenizer/gpt2/tokenizer.json \
    --batches "${ROLLOUT_BATCHES:-1,16,64,256}" 2>&1 | tee -a "$out/rollout-bench.txt"
  [ "$cmp" = none ] || {
    build/bin/kforge_rollout_bench --checkpoint "$ckpt" --tokenizer tests/data/tokenizer/gpt2/tokenizer.json \
      --batches "$cmp" --cuda_graphs=false 2>&1 | tail -3 | tee -a "$out/rollout-bench.txt"
    python3 bench/hf_generate_bench.py --checkpoint "$ckpt" --batches "$cmp" 2>&1 | grep -v Warning \
      | tee -a "$out/rollout-bench.txt"; }
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

if [ "$what" = verifier ]; then
  start=$(date +%s)
  configure
  cmake --build build -j "$(nproc)" --target kforge-verifier kforge_verifier_gpu_tests \
    kforge_verifier_bench > "$out/build.log" 2>&1 \
    || { grep -E "error|Error" -A3 "$out/build.log" | head -60; exit 1; }
  echo "verifier build: $(( $(date +%s) - start )) s"
  if [ "${VERIFIER_TEST_FILTER:-}" != skip ]; then
    build/bin/kforge_verifier_gpu_tests --gtest_filter="${VERIFIER_TEST_FILTER:-*}" \
      > "$out/verifier-gpu.log" 2>&1
    echo "kforge_verifier_gpu_tests: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "$out/verifier-gpu.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED|SKIPPED \]' "$out/verifier-gpu.log" | head -10
  fi
fi

if [ "$what" = mesh ]; then
  start=$(date +%s)
  configure
  cmake --build build -j "$(nproc)" --target kforge kforge-learner kforge-rollout kforge-verifier \
    > "$out/build.log" 2>&1 || { grep -E "error|Error" -A3 "$out/build.log" | head -60; exit 1; }
  echo "mesh build: $(( $(date +%s) - start )) s"
  cat > /tmp/gpu-mesh-job.json <<'JOB'
{"tasks": {"builtin": "kforge-mini", "heldout": ["level1/5_Softmax"]}, "warm_start_steps": 3,
 "total_steps": 4, "prompts_per_step": 2, "grpo": {"group_size": 4},
 "sampling": {"max_new_tokens": 200}, "sft": {"learning_rate": 0.01},
 "optimizer": {"batch_size": 8, "micro_batch_size": 4}, "eval": {"every_steps": 2},
 "verifier": {"timing": {"trials": 10}}, "checkpoint": {"every_steps": 2}}
JOB
  timeout 240 build/bin/kforge local --learner_port=0 --run_dir=/tmp/gpu-mesh \
    --job=/tmp/gpu-mesh-job.json > "$out/local-gpu.log" 2>&1
  echo "kforge local on the GPU: exit $?"; tail -16 "$out/local-gpu.log"
  grep -h -A40 "SIGSEGV\|SIGABRT\|SIGBUS" /tmp/gpu-mesh/*.log | head -60
  find /tmp/gpu-mesh -name curves.svg -exec cp {} "$out/" \;
  timeout 200 build/bin/kforge eval --candidates tasks/kforge-mini/solutions --tasks tasks/kforge-mini \
    --device cuda:0 --concurrency 4 --out "$out/eval" > "$out/eval.log" 2>&1
  rc=$?
  echo "kforge eval on the GPU: exit $rc"; tail -40 "$out/eval.log"
  # A crash: the same command under cuda-gdb (the GPU image has no gdb) for
  # every thread's stack.
  if [ "$rc" -ge 128 ] && command -v cuda-gdb > /dev/null; then
    timeout 240 cuda-gdb -batch -ex run -ex "thread apply all bt 25" --args build/bin/kforge eval \
      --candidates tasks/kforge-mini/solutions --tasks tasks/kforge-mini --device cuda:0 \
      --concurrency 4 --out /tmp/eval-gdb > "$out/eval-gdb.log" 2>&1
    grep -v "^\[New Thread\|^\[Thread .* exited" "$out/eval-gdb.log" | tail -120
  fi
fi

# One e2e job: e2e_job NAME STALENESS SECONDS, on the GPUs CUDA_VISIBLE_DEVICES
# leaves it, in /tmp/NAME; its log, curves, stage times and a tarball of the
# services' logs and samples.jsonl go to $out with NAME in their names.
e2e_job() {
  local name=$1 staleness=$2 seconds=$3 dir=/tmp/$1
  python3 scripts/e2e_job.py --kernelbench /tmp/kb-e2e --model /tmp/models/qwen2.5-coder-1.5b \
    --steps "${E2E_STEPS:-30}" \
    --warm "${E2E_WARM:-10}" --prompts "${E2E_PROMPTS:-16}" --group "${E2E_GROUP:-8}" \
    --tokens "${E2E_TOKENS:-256}" --staleness "$staleness" --train "${E2E_TRAIN:-0}" \
    --lookahead_steps "${E2E_LOOKAHEAD:-0}" --spare_groups "${E2E_SPARES:-0}" \
    --sft_lr "${E2E_SFT_LR:-1e-5}" --lr "${E2E_LR:-1e-6}" --micro "${E2E_MICRO:-1}" \
    --min_lr_ratio "${E2E_MIN_LR_RATIO:-0.1}" --temperature "${E2E_TEMPERATURE:-1.0}" \
    --eval_every "${E2E_EVAL_EVERY:-5}" \
    --timed_ms "${E2E_TIMED_MS:-}" --stop_below_loss "${E2E_STOP_BELOW_LOSS:-0}" \
    --log_samples "${E2E_LOG_SAMPLES:-0}" --turns "${E2E_TURNS:-1}" \
    --warm_up_verifiers "${E2E_WARM_UP:-1}" > "$dir-job.json"
  rm -rf "$dir"
  # E2E_AFFINITY_SLACK: the rollout workers' verifier_affinity_slack.
  local rollout_config=()
  if [ -n "${E2E_AFFINITY_SLACK:-}" ]; then
    echo "{\"verifier_affinity_slack\": $E2E_AFFINITY_SLACK}" > "$dir-rollout.json"
    rollout_config=(--rollout_config="$dir-rollout.json")
  fi
  echo "$name: at most $seconds s on GPU(s) ${CUDA_VISIBLE_DEVICES:-all}, max_staleness $staleness"
  timeout "$seconds" build/bin/kforge local --learner_port=0 --run_dir="$dir" "${rollout_config[@]}" \
    --rollout_workers="${E2E_ROLLOUT_WORKERS:-1}" --stop_grace_s=120 --job="$dir-job.json" \
    --model_roots=/tmp/models \
    --task_roots="/tmp/kb-e2e,$PWD/tasks,$(readlink -f "$KFORGE_KERNELBENCH_DIR")" > "$out/$name.log" 2>&1
  echo "$name: kforge local exit $?"
  local curves
  curves=$(find "$dir" -name curves.json | head -1)
  if [ -n "$curves" ]; then
    python3 bench/stage_times.py "$curves" > "$out/$name-stage-times.md"
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))
for name, key in (("reward", "reward_history"), ("correct", "correct_rate_history"), ("loss", "loss_history")):
    print(name, "per step:", " ".join(f"{float(r):.2f}" for r in s.get(key, [])))' "$curves" \
      > "$out/$name-curves.txt"
    cp "$curves" "$out/$name-curves.json"
    if [ "${E2E_TURNS:-1}" -gt 1 ]; then
      python3 bench/turn_shares.py "$curves" --window 5 --gpus "$(nvidia-smi -L | wc -l)" \
        > "$out/$name-turns.md" 2>&1
    fi
  fi
  # Where verification went, and any completion given two verdicts.
  local samples
  samples=$(find "$dir" -name samples.jsonl | head -1)
  [ -n "$samples" ] && python3 bench/sample_stats.py "$samples" > "$out/$name-samples.md"
  # The services' logs, the job, and each step's samples with the
  # verifier's reasons and stage times (samples.jsonl).
  tar czf "$out/$name-logs.tgz" "$dir"/*.log "$dir-job.json" "$dir"/state/jobs/*/samples.jsonl \
    "$dir"/state/jobs/*/curves.svg 2>/dev/null
}

if [ "$what" = e2e ] || [ "$what" = e2e-pair ] || [ "$what" = e2e-warm-up ]; then
  # The mesh at real scale on this node: a Qwen2.5-Coder-1.5B-shaped policy
  # (random weights; no hub here) with the GPT-2 byte-level tokenizer, a
  # supervised warm start on the corpus of KernelBench solutions, then GRPO
  # on those tasks at full size against the real funnel, held-out KernelBench
  # tasks evaluated every few steps. E2E_STEPS, E2E_WARM, E2E_PROMPTS,
  # E2E_GROUP, E2E_TOKENS, E2E_STALENESS, E2E_TRAIN, E2E_SFT_LR, E2E_LR,
  # E2E_MICRO, E2E_MIN_LR_RATIO, E2E_TEMPERATURE, E2E_EVAL_EVERY, E2E_TIMED_MS,
  # E2E_STOP_BELOW_LOSS, E2E_LOG_SAMPLES, E2E_TURNS, E2E_LOOKAHEAD, E2E_SPARES
  # (scripts/e2e_job.py's flags; the last two are --lookahead_steps and
  # --spare_groups),
  # E2E_ROLLOUT_WORKERS (kforge local's --rollout_workers), E2E_AFFINITY_SLACK
  # (the rollout workers' verifier_affinity_slack), E2E_WARM_UP (0:
  # no verifier warm-ups), E2E_SECONDS or E2E_DEADLINE.
  # e2e-pair: the same job and seed twice at once, synchronous
  # (max_staleness 0) on the first half of the GPUs and asynchronous
  # (max_staleness 1) on the second, for issue 22's side-by-side comparison.
  start=$(date +%s)
  configure
  cmake --build build -j "$(nproc)" --target kforge kforge-learner kforge-rollout kforge-verifier \
    > "$out/build.log" 2>&1 || { grep -E "error|Error" -A3 "$out/build.log" | head -60; exit 1; }
  echo "e2e build: $(( $(date +%s) - start )) s"
  ckpt=/tmp/models/qwen2.5-coder-1.5b
  [ -d "$ckpt" ] || python3 bench/hf_generate_bench.py --make qwen2.5-coder-1.5b "$ckpt" 2>&1 | tail -1
  cp tests/data/tokenizer/gpt2/tokenizer.json "$ckpt/"
  kb=/tmp/kb-e2e; mkdir -p "$kb"
  for level in level1 level2; do ln -sfn "$KFORGE_KERNELBENCH_DIR/$level" "$kb/$level"; done
  ln -sfn "$PWD/tasks/kernelbench-solutions" "$kb/solutions"
  # E2E_DEADLINE (epoch seconds) instead caps the jobs at whatever time the
  # build and the checkpoint left before it.
  seconds=${E2E_SECONDS:-420}
  [ -n "${E2E_DEADLINE:-}" ] && seconds=$(( E2E_DEADLINE - $(date +%s) ))
  if [ "$seconds" -lt 30 ]; then echo "e2e job: skipped, $seconds s left before E2E_DEADLINE"; exit 1; fi
  if [ "$what" = e2e ]; then
    e2e_job e2e "${E2E_STALENESS:-1}" "$seconds"
    tail -25 "$out/e2e.log"
  elif [ "$what" = e2e-warm-up ]; then
    # With warm-ups first: caches left on disk (Triton's, the build's) can
    # only favour the job without them, which runs second.
    E2E_WARM_UP=1 e2e_job e2e-warm "${E2E_STALENESS:-1}" $(( seconds / 2 ))
    [ -n "${E2E_DEADLINE:-}" ] && seconds=$(( E2E_DEADLINE - $(date +%s) )) || seconds=$(( seconds / 2 ))
    E2E_WARM_UP=0 e2e_job e2e-cold "${E2E_STALENESS:-1}" "$seconds"
    for name in e2e-warm e2e-cold; do echo "== $name"; tail -12 "$out/$name.log"; done
  else
    ngpu=$(nvidia-smi -L | wc -l)
    half=$(( ngpu / 2 ))
    if [ "$half" -lt 1 ]; then echo "e2e-pair needs two GPUs or more, this node has $ngpu"; exit 1; fi
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((half - 1))) e2e_job e2e-sync 0 "$seconds" &
    CUDA_VISIBLE_DEVICES=$(seq -s, "$half" $((2 * half - 1))) e2e_job e2e-async 1 "$seconds" &
    wait
    for name in e2e-sync e2e-async; do echo "== $name"; tail -12 "$out/$name.log"; done
  fi
  for f in "$out"/e2e*-stage-times.md "$out"/e2e*-curves.txt "$out"/e2e*-samples.md "$out"/e2e*-turns.md; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done
fi

if [ "$what" = verifier-corpus ] || [ "$what" = verifier-batch ]; then
  start=$(date +%s)
  configure
  cmake --build build -j "$(nproc)" --target kforge-verifier kforge_verifier_gpu_tests \
    kforge_verifier_batch_bench > "$out/build.log" 2>&1 \
    || { grep -E "error|Error" -A3 "$out/build.log" | head -60; exit 1; }
  echo "verifier build: $(( $(date +%s) - start )) s"
fi

if [ "$what" = verifier-corpus ]; then
  ngpu=$(nvidia-smi -L | wc -l)
  t0=$(date +%s)
  for i in $(seq 0 $((ngpu - 1))); do
    CUDA_VISIBLE_DEVICES=$i GTEST_TOTAL_SHARDS=$ngpu GTEST_SHARD_INDEX=$i timeout "${CORPUS_SECONDS:-300}" \
      build/bin/kforge_verifier_gpu_tests --gtest_filter="${CORPUS_FILTER:-KernelBench/*}" > "$out/corpus-$i.log" 2>&1 &
  done
  wait
  echo "corpus: $(( $(date +%s) - t0 )) s on $ngpu GPU(s)"
  cat "$out"/corpus-*.log | grep -E "^corpus" | sort > "$out/corpus.txt"
  awk '{print $3}' "$out/corpus.txt" | sort | uniq -c
  grep -h -E "^\[  FAILED  \] KernelBench" "$out"/corpus-*.log | sed 's/, where.*//' | sort -u
  if [ "${CORPUS_ONLY:-false}" = true ]; then exit 0; fi
  CUDA_VISIBLE_DEVICES=0 timeout 200 build/bin/kforge_verifier_gpu_tests \
    --gtest_filter='-KernelBench/*:SecondGpu*' > "$out/gpu-tests.log" 2>&1
  echo "other GPU tests: exit $?"; grep -E "^\[ +(OK|FAILED) " "$out/gpu-tests.log"
  # A verifier of a GPU other than the first (skips on one GPU).
  timeout 120 build/bin/kforge_verifier_gpu_tests --gtest_filter='SecondGpu*' \
    > "$out/second-gpu-test.log" 2>&1
  echo "second-GPU test: exit $?"; grep -E "^\[ +(OK|FAILED|SKIPPED) " "$out/second-gpu-test.log"
fi

if [ "$what" = verifier-batch ]; then
  python3 bench/make_grpo_batch.py --kernelbench "$KFORGE_KERNELBENCH_DIR" --out /tmp/batch
  ngpu=$(nvidia-smi -L | wc -l)
  devices=$(seq -s, -f 'cuda:%g' 0 $((ngpu - 1)))
  counts=${BATCH_GPU_COUNTS:-$( [ "$ngpu" -ge 2 ] && echo 1,2 || echo 1 )}
  timeout "${BATCH_SECONDS:-420}" build/bin/kforge_verifier_batch_bench --batch /tmp/batch/batch.json \
    --devices "$devices" --gpu_counts "$counts" --concurrency "${BATCH_CONCURRENCY:-8}" --spare_sandboxes "${BATCH_SPARES:-4}" \
    --correctness_timeout_s 30 --cv_repeats "${CV_REPEATS:-20}" --out "$out/kforge_batch${BATCH_TAG:-}.json" \
    --launch_cover_ms "${BATCH_LAUNCH_COVER_MS:--1}" --cv_launch_cover_ms "${CV_LAUNCH_COVER_MS:--1}" \
    --task_affinity="${BATCH_TASK_AFFINITY:-true}" --warm_variant_sets="${BATCH_WARM:-true}" \
    --one_at_a_time="${ALONE:-true}" --overlap_warm_up="${BATCH_OVERLAP:-true}" \
    --alone_overlap="${ALONE_OVERLAP:-true,false}" --alone_repeats="${ALONE_REPEATS:-2}" \
    --triton_launchers="${BATCH_LAUNCHERS:-256}" \
    > "$out/kforge_batch${BATCH_TAG:-}.txt" 2>&1
  echo "kforge batch: exit $?"; grep -v "^\[" "$out/kforge_batch${BATCH_TAG:-}.txt" | grep -v "^ts=" | tail -45
  if [ -d .gpu-work/kernelbench-repo ] && [ "${PEER_SECONDS:-240}" != 0 ]; then
    python3 -c 'import json; k={i["id"]: i["kind"] for i in json.load(open("/tmp/batch/batch.json"))}; json.dump([p for p in json.load(open("/tmp/batch/pairs.json")) if k[p["id"]] != "hang"], open("/tmp/batch/pairs-peer.json", "w"))'
    PYTHONUNBUFFERED=1 python3 bench/kernelbench_peer.py --pairs /tmp/batch/pairs-peer.json \
      --kernelbench .gpu-work/kernelbench-repo --devices "$devices" --timeout 120 \
      --deadline "${PEER_SECONDS:-240}" --out "$out/kb_peer.json" > "$out/kb_peer.log" 2>&1
    tail -12 "$out/kb_peer.log"
    python3 bench/compare_batch.py --batch /tmp/batch/batch.json --kforge "$out/kforge_batch${BATCH_TAG:-}.json" \
      --peer "$out/kb_peer.json" | tee "$out/compare.txt"
  fi
fi

if [ "$what" = bench ] || [ "$what" = verifier ] || [ "$what" = all ]; then
  mkdir -p /tmp/kfbench/tasks /tmp/kfbench/candidates
  t=tests/data/verifier/triton
  for task in 1_ReLU:relu 3_RowSum:row_sum 4_RMSNorm:rms_norm; do
    cp "tasks/kforge-mini/level1/${task%%:*}.py" "/tmp/kfbench/tasks/${task##*:}.py"
    cp "tasks/kforge-mini/solutions/level1/${task%%:*}.py" "/tmp/kfbench/candidates/${task##*:}.py"
  done
  cp "$KFORGE_KERNELBENCH_DIR/level1/23_Softmax.py" /tmp/kfbench/tasks/kb_softmax.py
  cp "$KFORGE_KERNELBENCH_DIR/level1/19_ReLU.py" /tmp/kfbench/tasks/kb_relu.py
  cp "$t/kb_softmax.py" /tmp/kfbench/candidates/
  build/bin/kforge_verifier_bench --device cuda:0 --tasks /tmp/kfbench/tasks \
    --candidates /tmp/kfbench/candidates --count 48 --concurrency 4 --repeats 20 --timed kb_softmax \
    ${VERIFIER_BENCH_ARGS:-} 2>&1 | tee "$out/bench.txt"
fi
