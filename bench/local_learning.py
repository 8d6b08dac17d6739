#!/usr/bin/env python3
"""Does the default `kforge local` job visibly learn, in time, for several seeds?

Runs `kforge local --seed N` (the default job: warm start, then GRPO against
the real verifier on the built-in tasks) once per seed, each in a fresh run
folder, one after the other, and prints per seed: the wall time of the whole
command (start-up, tiny model, warm start, GRPO, shutdown), the mean reward of
the first and of the last ten GRPO steps (from the final checkpoint's
trainer_state.json), their ratio, and whether the run met the targets of
issue 22 (ratio >= 2, wall time <= 15 min).

  bench/local_learning.py                    # seeds 0 1 2, build/bin/kforge
  bench/local_learning.py --seeds 3 --short  # CI's short job, for a smoke run
  bench/local_learning.py --job FILE.json    # another job (its own seeds)

Exit status 0 when every seed met both targets. Run it on an otherwise idle
machine: the wall time is the point, and other work on the cores stretches it.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

WINDOW = 10  # GRPO steps averaged at each end, as `kforge local`'s summary does


def final_state(run_dir):
    """(trainer_state, warm_start_steps) of the run's only job."""
    jobs = sorted(glob.glob(os.path.join(run_dir, "state", "jobs", "job-*.json")))
    if not jobs:
        raise RuntimeError(f"no job record under {run_dir}/state/jobs")
    with open(jobs[0]) as f:
        job = json.load(f)
    checkpoint = job.get("last_checkpoint", "")
    if not checkpoint:
        raise RuntimeError(f"{jobs[0]}: the job wrote no checkpoint (state {job.get('state')})")
    with open(os.path.join(checkpoint, "trainer_state.json")) as f:
        state = json.load(f)
    # sft.stop_below_loss may have ended the warm start before the spec's count.
    ended = int(state.get("warm_start_ended_at", state.get("warmStartEndedAt", 0)) or 0)
    warm = ended or int(job["spec"].get("warm_start_steps", 0))
    return state, warm, job.get("state", "")


def summarize(rewards, window=WINDOW):
    """Means of the first and last `window` values (fewer when the run is short)."""
    n = min(window, max(1, len(rewards) // 4))
    first = sum(rewards[:n]) / n
    last = sum(rewards[-n:]) / n
    return n, first, last, (last / first if first > 0 else float("inf") if last > 0 else 0.0)


def run_seed(args, seed):
    run_dir = os.path.join(args.out_dir, f"seed-{seed}")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    cmd = [args.kforge, "local", "--learner_port=0", f"--run_dir={run_dir}", f"--seed={seed}"]
    if args.short:
        cmd.append("--short")
    if args.job:
        cmd.append(f"--job={args.job}")
    log = os.path.join(run_dir, "kforge-local.out")
    started = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT)
    wall = time.monotonic() - started
    state, warm, job_state = final_state(run_dir)
    rewards = [float(r) for r in state.get("reward_history", [])][warm:]
    n, first, last, ratio = summarize(rewards)
    return {
        "seed": seed, "exit": code, "job_state": job_state, "wall_s": wall,
        "grpo_steps": len(rewards), "window": n, "first": first, "last": last,
        "ratio": ratio, "log": log,
        "correct_last": [float(x) for x in state.get("correct_rate_history", [])][warm:][-n:],
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--kforge", default=os.path.join(here, "..", "build", "bin", "kforge"))
    parser.add_argument("--out_dir", default="/tmp/kforge-local-learning")
    parser.add_argument("--short", action="store_true", help="the short job (CI's), not the default")
    parser.add_argument("--job", default="", help="a JobSpec file instead of the default job")
    parser.add_argument("--ratio_target", type=float, default=2.0)
    parser.add_argument("--minutes_target", type=float, default=15.0)
    parser.add_argument("--json", default="", help="also write the rows to this file")
    args = parser.parse_args()

    rows = []
    header = (f"{'seed':>4} {'exit':>4} {'wall':>8} {'grpo steps':>10} {'first':>7} {'last':>7} "
              f"{'ratio':>6} {'last correct':>12}  verdict")
    print(f"kforge local learning: {len(args.seeds)} seed(s), {os.cpu_count()} CPU(s), "
          f"targets: last/first >= {args.ratio_target}, wall <= {args.minutes_target} min")
    print(header, flush=True)
    for seed in args.seeds:
        row = run_seed(args, seed)
        ok_ratio = row["ratio"] >= args.ratio_target
        ok_time = row["wall_s"] <= 60 * args.minutes_target
        row["pass"] = row["exit"] == 0 and ok_ratio and ok_time
        verdict = "PASS" if row["pass"] else "FAIL (" + ", ".join(
            w for w, bad in (("exit", row["exit"] != 0), ("ratio", not ok_ratio),
                             ("time", not ok_time)) if bad) + ")"
        correct = sum(row["correct_last"]) / max(1, len(row["correct_last"]))
        minutes, seconds = divmod(row["wall_s"], 60)
        print(f"{seed:>4} {row['exit']:>4} {int(minutes):>4}m{seconds:02.0f}s {row['grpo_steps']:>10} "
              f"{row['first']:>7.3f} {row['last']:>7.3f} {row['ratio']:>6.2f} {100 * correct:>11.0f}%"
              f"  {verdict}", flush=True)
        rows.append(row)
    print(f"(first/last: mean reward of the first and last {rows[0]['window'] if rows else WINDOW} "
          f"GRPO steps; last correct: share of correct samples over the last ones; logs under "
          f"{args.out_dir}/seed-N/)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if rows and all(r["pass"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
