#!/usr/bin/env python3
"""Per-turn figures of a multi-turn job, early against late in training.

Reads <job dir>/curves.json (the learner's TrainerState figures; its
turn_history holds each step's JobProgress.solved_by_turn, reward_by_turn and
turns_per_trajectory) and prints, over the first and the last N sampled steps,
the mean share of trajectories solved by turn 1, 2, ... and the mean reward of
each turn. Steps without per-turn figures (the warm start) are left out.

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


if __name__ == "__main__":
    main()
