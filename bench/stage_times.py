"""Where a finished job's steps spent their time, from its curves.json (the
learner writes it beside curves.svg at every checkpoint; StepTimes in
proto/kforge/v1/job.proto defines each figure). One column per job, so a
synchronous (max_staleness 0) and an asynchronous (max_staleness 1) run of
the same job and seed sit side by side; the output is a Markdown table for
bench/RESULTS.md.

  python3 bench/stage_times.py STATE/jobs/job-000001/curves.json \
      [STATE/jobs/job-000002/curves.json] [--skip 2] [--label sync --label async] \
      [--metrics http://rollout:9092/metrics --metrics http://verifier:9093/metrics]

Rows:
  - mean seconds per step of the step (its cadence) and of each stage;
  - the slowest working stage (rollout, verify, train, weight sync) and the
    step's mean over that stage's mean: at most 1.1 is the asynchronous target;
  - a candidate's wait from its generation to its verification (mean over
    the steps of each step's mean, and the longest);
  - the learner's wait as a share of step time (target: at most 10%);
  - throughput: generated tokens over rollout time, candidates over verify
    time, trained tokens over training time (sums over the steps counted);
  - samples counted and how many carried generation stamps;
  - the reward: the mean of the first and the last five sampled steps and
    each five's spread (sample standard deviation of the step means); issue
    22's target is last - first > the larger spread.
Only sampled steps count (supervised warm-start steps sample nothing);
--skip leaves out the first N of them (start-up: CUDA graph capture,
compile caches).

--metrics reads Prometheus text (a URL or a saved file) from rollout workers
and verifiers and adds their idle shares: kforge_rollout_sampler_seconds_total
(idle over all) and kforge_verifier_slot_seconds_total (idle over busy +
idle). Those counters run from each process's start, so scrape a mesh that
ran only the job, or save a scrape before and after and pass
--metrics AFTER --metrics-base BEFORE in the same order.

Standard library only.
"""

import argparse
import json
import re
import statistics
import sys
import urllib.request

STAGES = [  # (row name, StepTimes field)
    ("step", "step_seconds"),
    ("rollout", "rollout_seconds"),
    ("verify", "verify_seconds"),
    ("train", "train_seconds"),
    ("weight sync", "weight_sync_seconds"),
    ("learner wait", "learner_wait_seconds"),
]
WORKING = ["rollout", "verify", "train", "weight sync"]


def number(times, field):
    # protobuf's JSON mapping leaves zeros out and writes int64 as a string.
    return float(times.get(field, 0) or 0)


def sampled_steps(path, skip):
    """The sampled steps' times and mean rewards. reward_history and
    step_times_history align from the newest end (learner_state.proto)."""
    with open(path) as f:
        state = json.load(f)
    history = state.get("step_times_history", state.get("stepTimesHistory", []))
    rewards = state.get("reward_history", state.get("rewardHistory", []))
    rewards = [None] * (len(history) - len(rewards)) + rewards[-len(history):] if history else []
    steps = [dict(t, reward=r) for t, r in zip(history, rewards) if number(t, "samples") > 0]
    return steps[skip:]


def reward_trend(steps, window=5):
    rewards = [float(t["reward"]) for t in steps if t.get("reward") is not None]
    if len(rewards) < 2 * window:
        return None
    first, last = rewards[:window], rewards[-window:]
    return {"first": statistics.mean(first), "last": statistics.mean(last),
            "first_spread": statistics.stdev(first), "last_spread": statistics.stdev(last)}


def summarise(steps):
    n = len(steps)
    if n == 0:
        return None
    total = {field: sum(number(t, field) for t in steps) for _, field in STAGES}
    mean = {name: total[field] / n for name, field in STAGES}
    slowest = max(WORKING, key=lambda name: mean[name])

    def per_second(count_field, seconds_field):
        seconds = total[seconds_field]
        count = sum(number(t, count_field) for t in steps)
        return count / seconds if seconds > 0 else 0.0

    return {
        "steps": n,
        "mean": mean,
        "slowest": slowest,
        "ratio": mean["step"] / mean[slowest] if mean[slowest] > 0 else float("inf"),
        "wait_share": total["learner_wait_seconds"] / total["step_seconds"]
        if total["step_seconds"] > 0 else 0.0,
        "rollout_tps": per_second("generated_tokens", "rollout_seconds"),
        "verify_cps": per_second("candidates_verified", "verify_seconds"),
        "train_tps": per_second("trained_tokens", "train_seconds"),
        "samples": int(sum(number(t, "samples") for t in steps)),
        "timed": int(sum(number(t, "samples_timed") for t in steps)),
        "reward": reward_trend(steps),
        "queue_mean": sum(number(t, "verify_queue_mean_seconds") for t in steps) / n,
        "queue_max": max(number(t, "verify_queue_max_seconds") for t in steps),
    }


SERIES = re.compile(r'^(kforge_rollout_sampler_seconds_total|kforge_verifier_slot_seconds_total)'
                    r'\{[^}]*state="([a-z_]+)"[^}]*\}\s+([0-9.eE+-]+)', re.M)


def read_text(source):
    if source.startswith("http://") or source.startswith("https://"):
        with urllib.request.urlopen(source, timeout=10) as r:
            return r.read().decode()
    with open(source) as f:
        return f.read()


def state_seconds(text):
    out = {}
    for family, state, value in SERIES.findall(text):
        out[(family, state)] = out.get((family, state), 0.0) + float(value)
    return out


def idle_share(source, base):
    now = state_seconds(read_text(source))
    before = state_seconds(read_text(base)) if base else {}
    delta = {k: v - before.get(k, 0.0) for k, v in now.items()}
    for family, kind in (("kforge_rollout_sampler_seconds_total", "rollout"),
                         ("kforge_verifier_slot_seconds_total", "verifier")):
        states = {s: v for (f, s), v in delta.items() if f == family}
        if states and sum(states.values()) > 0:
            return kind, states.get("idle", 0.0) / sum(states.values())
    return None, None


def table(labels, summaries):
    header = "| | " + " | ".join(labels) + " |"
    rule = "|---|" + "---|" * len(labels)
    rows = [header, rule]

    def row(name, cell):
        rows.append(f"| {name} | " + " | ".join(cell(s) if s else "-" for s in summaries) + " |")

    row("sampled steps counted", lambda s: str(s["steps"]))
    for name, _ in STAGES:
        row(f"{name}, mean s/step", lambda s, name=name: f"{s['mean'][name]:.3f}")
    row("candidate's wait for a verifier, mean / longest s",
        lambda s: f"{s['queue_mean']:.3f} / {s['queue_max']:.3f}")
    row("slowest stage", lambda s: s["slowest"])
    row("step / slowest stage (target <= 1.1)", lambda s: f"{s['ratio']:.2f}")
    row("learner wait share (target <= 10%)", lambda s: f"{100 * s['wait_share']:.1f}%")
    row("rollout tokens/s (over the rollout span)", lambda s: f"{s['rollout_tps']:.1f}")
    row("verify candidates/s (over the verify span)", lambda s: f"{s['verify_cps']:.2f}")
    row("train tokens/s (over optimiser time)", lambda s: f"{s['train_tps']:.1f}")
    row("samples (with generation stamps)", lambda s: f"{s['samples']} ({s['timed']})")

    def trend(s):
        r = s["reward"]
        if r is None:
            return "fewer than 10 sampled steps"
        rose = r["last"] - r["first"] > max(r["first_spread"], r["last_spread"])
        return (f"{r['first']:.3f} (sd {r['first_spread']:.3f}) -> {r['last']:.3f} "
                f"(sd {r['last_spread']:.3f}): {'rose' if rose else 'did not rise'} beyond the spread")
    row("mean reward, first 5 -> last 5 sampled steps", trend)
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("curves", nargs="+", help="curves.json of each job")
    parser.add_argument("--label", action="append", default=[], help="column name, per job")
    parser.add_argument("--skip", type=int, default=0, help="leave out the first N sampled steps")
    parser.add_argument("--metrics", action="append", default=[],
                        help="Prometheus text of a rollout worker or verifier (URL or file)")
    parser.add_argument("--metrics-base", action="append", default=[],
                        help="an earlier scrape of the same process, per --metrics, subtracted")
    args = parser.parse_args(argv)
    labels = args.label + [p for p in args.curves[len(args.label):]]
    summaries = [summarise(sampled_steps(p, args.skip)) for p in args.curves]
    print(table(labels[:len(args.curves)], summaries))
    if args.metrics:
        print()
        print("| process | idle share (target <= 10%) |")
        print("|---|---|")
        for i, source in enumerate(args.metrics):
            base = args.metrics_base[i] if i < len(args.metrics_base) else None
            kind, share = idle_share(source, base)
            shown = f"{100 * share:.1f}%" if share is not None else "no kforge time counters"
            print(f"| {kind or '?'} {source} | {shown} |")
    return 0 if all(summaries) else 1


if __name__ == "__main__":
    sys.exit(main())
