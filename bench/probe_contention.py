"""How often a fresh-input probe's single timed call of a small correct kernel
reads far above its trials' median while another process keeps the same GPU
busy, by launch cover (TimingProtocol.probe_launch_cover_ms) and by the
other process's kind of work.

In a 4x H100 GRPO job a correct 0.073 ms ELU kernel read 2.49 ms on both of
its fresh-input probes (flagged HACK_RESULT_CACHING) while its verifier
shared the GPU with a rollout worker or the learner. This measures the
harness's own Timer.one() (what the probe calls) on an elementwise Triton
kernel, a probe being a warm-up on a seen input then one call on a new one.

  python3 bench/probe_contention.py [--probes 40] [--covers 0,0.5,1,2,4]
  python3 bench/probe_contention.py --pairs 2:0,1:1.5   # the old and new probe covers
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "verifier_worker", "harness"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kforge_harness import timing  # noqa: E402

# What the other process runs: a loop of mid-size GEMMs (each about 0.2 ms),
# a loop of long GEMMs (about 10 ms each), and a loop of short kernels with
# host gaps (a decode-like pattern).
CO_TENANTS = {
    "gemm-4096": "a = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16)\n"
                 "while True:\n"
                 "    for _ in range(50): b = a @ a\n"
                 "    torch.cuda.synchronize()\n",
    "gemm-16384": "a = torch.randn(16384, 16384, device='cuda', dtype=torch.bfloat16)\n"
                  "while True:\n"
                  "    b = a @ a\n"
                  "    torch.cuda.synchronize()\n",
    "small-kernels": "a = torch.randn(1 << 20, device='cuda')\n"
                     "while True:\n"
                     "    for _ in range(200): a.mul_(1.0001)\n"
                     "    torch.cuda.synchronize()\n"
                     "    time.sleep(0.0005)\n",
    "small-kernels-long": "a = torch.randn(1 << 20, device='cuda')\n"
                          "while True:\n"
                          "    for _ in range(800): a.mul_(1.0001)\n"
                          "    torch.cuda.synchronize()\n"
                          "    time.sleep(0.002)\n",
}


@triton.jit
def _elu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.where(x > 0, x, tl.exp(x) - 1.0)
    tl.store(out_ptr + offs, y, mask=mask)


def elu(x):
    out = torch.empty_like(x)
    n = x.numel()
    _elu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024, num_warps=8)
    return out


def measure(timer, numel, probes, covers, trial_cover):
    """Probes as the verifier makes them: a warm-up on a seen input, then one
    call on a new input per cover in `covers`, the fastest judged."""
    seen = [torch.randn(numel, device="cuda")]
    trials = [timer.one(elu, seen, True, True, trial_cover)[0] for _ in range(60)]
    usual = statistics.median(trials)
    times = []
    for _ in range(probes):
        timer.warm_up(elu, [seen], timing.Budget({"warmup_ms": 20.0}))
        times.append(min(timer.one(elu, [torch.randn(numel, device="cuda")], True, True, cover)[0]
                         for cover in covers))
    times.sort()
    return usual, times, sum(t > 2 * usual for t in times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--probes", type=int, default=40)
    parser.add_argument("--covers", default="0,0.5,1,2,4")
    parser.add_argument("--numel", type=int, default=64 << 20)
    parser.add_argument("--co_tenants", default="none," + ",".join(CO_TENANTS))
    parser.add_argument("--pairs", default="",
                        help="cover:step pairs, e.g. 2:0,1:1.5: the faster of two probes each")
    args = parser.parse_args()
    covers = [float(c) for c in args.covers.split(",")]
    timer = timing.Timer("cuda:0")
    elu(torch.randn(1024, device="cuda"))  # compile once
    print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"triton {triton.__version__}; ELU over {args.numel} fp32 elements")
    print("| other process | probe cover ms | trials' median ms | probe p50 ms | probe p90 ms "
          "| probe max ms | probes > 2x median |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in args.co_tenants.split(","):
        other = None
        if name != "none":
            other = subprocess.Popen([sys.executable, "-c", "import time, torch\n" + CO_TENANTS[name]])
            time.sleep(8)  # its CUDA context and first kernels
        try:
            settings = ([tuple(float(v) for v in p.split(":")) for p in args.pairs.split(",")]
                        if args.pairs else [(c, None) for c in covers])
            for cover, step in settings:
                probe_covers = [cover] if step is None else [cover, cover + step]
                usual, times, flagged = measure(timer, args.numel, args.probes, probe_covers, 1.0)
                label = " and ".join(f"{c:g}" for c in probe_covers)
                if step is not None:
                    label += ", faster"
                print(f"| {name} | {label} | {usual:.4f} | {times[len(times) // 2]:.4f} | "
                      f"{times[int(0.9 * (len(times) - 1))]:.4f} | {times[-1]:.4f} | "
                      f"{flagged} of {len(times)} |", flush=True)
        finally:
            if other is not None:
                other.kill()
                other.wait()


if __name__ == "__main__":
    main()
