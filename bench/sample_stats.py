#!/usr/bin/env python3
"""Where a job's verification went, and whether its verdicts agree, from the
job's samples.jsonl (JobSpec.sample_log).

  python3 bench/sample_stats.py STATE_DIR/jobs/JOB/samples.jsonl

Prints, over the samples the log holds: how many reached each stage and how
they ended there, with the verifier's seconds (mean and longest); the
commonest failure messages (their last line); how many verdicts came from the
verdict cache; the candidates that waited for a new reference epoch and what
that cost before their first stage; and every completion verified more than
once whose verdicts disagree on how far it got or whether it was correct
(a cached verdict counts: it is its verifier's verdict). A verifier that is right gives one completion one
verdict: a disagreement is a load- or device-dependent failure (the 4xH100
e2e job's verifiers of GPUs 1-3 failed kernels that cuda:0 accepted). Exit
status 1 when any disagree.

Then each rollout worker's and verifier's idle share over the logged steps
after the first SKIP (default 1: start-up): 1 - (the union of its samples'
generation, or verification, intervals) / (the span from the first such
interval's start to the last one's end over all workers of its kind). It
counts only logged samples, so log every sample (sample_log.per_step at
least prompts x group) for a true figure; samples retired as stale or
re-issued were work too and are not in the log. Standard library only.

  python3 bench/sample_stats.py SAMPLES.jsonl [--skip N]
"""
import argparse
import collections
import json
import statistics
import sys


def last_line(message):
    lines = [line for line in message.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else ""


def busy_seconds(intervals):
    """The length of the union of [start, end] intervals (microseconds in,
    seconds out)."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total / 1e6


def idle_shares(rows, who, start_key, end_key):
    """{worker: (idle share, busy s, span s)} over the rows that carry both
    stamps, the span shared by every worker of the kind."""
    stamped = [r for r in rows if r.get(who) and (r.get(start_key) or 0) > 0
               and (r.get(end_key) or 0) >= (r.get(start_key) or 0)]
    if not stamped:
        return {}
    first = min(int(r[start_key]) for r in stamped)
    last = max(int(r[end_key]) for r in stamped)
    span = (last - first) / 1e6
    by_worker = collections.defaultdict(list)
    for r in stamped:
        by_worker[r[who]].append((int(r[start_key]), int(r[end_key])))
    out = {}
    for worker, intervals in sorted(by_worker.items()):
        busy = busy_seconds(intervals)
        out[worker] = (1 - busy / span if span > 0 else 0.0, busy, span)
    return out


def print_idle(rows, skip):
    steps = sorted(set(r["step"] for r in rows))
    kept = set(steps[skip:])
    counted = [r for r in rows if r["step"] in kept]
    print(f"idle shares over steps {steps[skip] if len(steps) > skip else '-'}.."
          f"{steps[-1] if steps else '-'} (target <= 10%):")
    for kind, who, start_key, end_key in (
            ("rollout worker", "rollout_worker", "generation_started_us", "generation_finished_us"),
            ("verifier", "verifier", "verify_started_us", "verify_finished_us")):
        shares = idle_shares(counted, who, start_key, end_key)
        if not shares:
            print(f"  {kind}s: no stamped samples")
        for worker, (share, busy, span) in shares.items():
            print(f"  {kind} {worker}: idle {100 * share:.1f}% (busy {busy:.1f} of {span:.1f} s)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("samples", help="the job's samples.jsonl")
    parser.add_argument("--skip", type=int, default=1,
                        help="logged steps left out of the idle shares (start-up)")
    args = parser.parse_args()
    skip = args.skip
    with open(args.samples) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    print(f"samples: {len(rows)} over {len(set(r['step'] for r in rows))} step(s)")
    if not rows:
        return 0
    by_stage = collections.defaultdict(list)
    for r in rows:
        by_stage[(r.get("stage_reached", ""), r.get("outcome", ""))].append(r)
    print("| stage reached | outcome | samples | verify s, mean | longest |")
    print("|---|---|---:|---:|---:|")
    for (stage, outcome), group in sorted(by_stage.items(), key=lambda kv: -len(kv[1])):
        seconds = [float(r.get("verify_seconds") or 0) for r in group]
        print(f"| {stage} | {outcome} | {len(group)} | {statistics.mean(seconds):.2f} | "
              f"{max(seconds):.2f} |")
    failures = collections.Counter(last_line(r.get("message", "")) for r in rows
                                   if not r.get("correct") and r.get("message"))
    print("commonest failure messages:")
    for message, count in failures.most_common(5):
        print(f"  {count:6d}  {message}")
    cached = sum(1 for r in rows if r.get("cached"))
    print(f"served from the verdict cache: {cached} of {len(rows)}")
    computed = [r for r in rows if not r.get("cached")]
    fresh = [r for r in computed if r.get("stage_reached") not in ("", "STAGE_STATIC")
             and not r.get("reference_reused")]
    if fresh:
        before = [float(r.get("verify_seconds") or 0) - sum(r.get("stage_seconds", {}).values())
                  for r in fresh]
        print(f"computed past the static check with a new reference epoch: {len(fresh)}, "
              f"{statistics.mean(before):.2f} s before their stages on average")
    verdicts = collections.defaultdict(set)
    for r in rows:
        verdicts[(r["task"], r.get("completion", ""))].add(
            (r.get("stage_reached", ""), bool(r.get("correct"))))
    disagree = {key: seen for key, seen in verdicts.items() if len(seen) > 1}
    print(f"completions verified more than once with different verdicts: {len(disagree)}")
    for (task, _), seen in list(disagree.items())[:5]:
        print(f"  {task}: " + "; ".join(f"{stage} correct={ok}" for stage, ok in sorted(seen)))
    print_idle(rows, skip)
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
