#!/usr/bin/env python3
"""Per-turn figures of a multi-turn job, early against late in training.

Reads <job dir>/curves.json (the learner's TrainerState figures; its
turn_history holds each step's JobProgress.solved_by_turn, reward_by_turn and
turns_per_trajectory) and prints, over the first and the last N sampled steps,
the mean share of trajectories solved by turn 1, 2, ... and the mean reward of
each turn. Steps without per-turn figures (the warm start) are left out.
Then what a trajectory cost over the same spans, from the step times
(step_times_history): the step's wall time, its generated tokens and its
verifications per trajectory (trajectories = candidates verified / turns
per trajectory), and with --gpus G the GPU-seconds of the node per
trajectory (the step's wall time x G: every GPU is held for the step).

    bench/turn_shares.py kforge-local/state/jobs/job-000001/curves.json --window 10
"""
import argparse
import json


def mean(values):
    return sum(values) / len(values) if values else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", help="a job's curves.json")
    parser.add_argument("--window", type=int, default=10, help="sampled steps in each span")
    parser.add_argument("--gpus", type=int, default=0, help="GPUs of the node (0: CPU)")
    args = parser.parse_args()
    state = json.load(open(args.curves))
    history = state.get("turn_history", [])
    step = int(state.get("step", len(history)))
    first = step - len(history) + 1
    sampled = [(first + i, p) for i, p in enumerate(history) if p.get("solved_by_turn")]
    # The warm start's points carry no figures of their own; steps after
    # warm_start_ended_at (or all, when unknown) are the sampled ones.
    ended = int(state.get("warm_start_ended_at", 0) or 0)
    sampled = [(s, p) for s, p in sampled if s > ended]
    if not sampled:
        raise SystemExit(f"{args.curves}: no per-turn figures (not a multi-turn job?)")
    turns = max(len(p["solved_by_turn"]) for _, p in sampled)
    spans = [("early", sampled[:args.window]), ("late", sampled[-args.window:])]
    header = ["span", "steps"] + [f"solved by turn {k + 1}" for k in range(turns)] + \
             [f"reward turn {k + 1}" for k in range(turns)] + ["turns/trajectory"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, points in spans:
        row = [name, f"{points[0][0]}-{points[-1][0]}"]
        for k in range(turns):
            row.append(f"{mean([p['solved_by_turn'][k] for _, p in points]):.3f}")
        for k in range(turns):
            row.append(f"{mean([p.get('reward_by_turn', [0] * turns)[k] for _, p in points]):.3f}")
        row.append(f"{mean([p.get('turns_per_trajectory', 0) for _, p in points]):.2f}")
        print("| " + " | ".join(row) + " |")
    times = state.get("step_times_history", [])
    first_timed = step - len(times) + 1
    times_at = {first_timed + i: t for i, t in enumerate(times)}
    header = ["span", "steps", "trajectories a step", "step s per trajectory",
              "tokens per trajectory", "verifications per trajectory"]
    if args.gpus > 0:
        header.append("GPU-s per trajectory")
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, points in spans:
        per = []
        for s_, p in points:
            t = times_at.get(s_)
            turns_each = p.get("turns_per_trajectory", 0)
            verified = int(t.get("candidates_verified", 0)) if t else 0
            if not t or turns_each <= 0 or verified <= 0:
                continue
            n = verified / turns_each
            per.append((n, float(t.get("step_seconds", 0)) / n,
                        int(t.get("generated_tokens", 0)) / n, turns_each))
        if not per:
            print(f"| {name} | no step times |")
            continue
        row = [name, f"{points[0][0]}-{points[-1][0]}", f"{mean([x[0] for x in per]):.1f}",
               f"{mean([x[1] for x in per]):.3f}", f"{mean([x[2] for x in per]):.0f}",
               f"{mean([x[3] for x in per]):.2f}"]
        if args.gpus > 0:
            row.append(f"{mean([x[1] for x in per]) * args.gpus:.2f}")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
