"""Writes the JobSpec (JSON) of the real-shaped GPU job: GRPO on the
KernelBench tasks that have a solution in the corpus (the warm start trains
on those solutions, on the same prompts the policy then sees), with a few
level-1 tasks without one held out and evaluated every few steps.

  python3 scripts/e2e_job.py --kernelbench DIR --model CKPT [--steps 30] [--warm 10]
      [--prompts 16] [--group 8] [--tokens 256] [--staleness 1] [--lookahead_steps 0]
      [--spare_groups 0] [--warm_up_verifiers 1]
      [--heldout 4] [--train N] [--sft_lr R] [--lr R] [--min_lr_ratio F] [--micro M]
      [--temperature T] [--eval_every N] [--timed_ms MIN,MAX]
      [--stop_below_loss L] [--log_samples N] > job.json

DIR is in the KernelBench layout with the corpus beside it as DIR/solutions
(scripts/gpu-run.sh e2e links one). Standard library only.

--train N keeps the N level-1 tasks whose corpus solutions are shortest (0:
every task with a solution). A randomly initialised policy cannot write a
kernel; a warm start that has seen a few short solutions many times can, now
and then, and only then do a group's rewards differ and GRPO have anything
to learn from. The held-out tasks stay the same either way.

--stop_below_loss L ends the warm start once its loss (the mean of the last
five steps) is below L (SftParams.stop_below_loss), --warm then being the
most it may take: a warm start run until the policy has memorised the
solutions leaves every sample of a group the same, and GRPO nothing to learn.

--log_samples N writes each GRPO step's first N samples, with the verifier's
reasons and stage times, to the job's samples.jsonl (0: the default, 16).

--lookahead_steps N lets the groups of up to N later steps (bounded by
--staleness) be sampled while a step's batch is collected, not only while it trains
(JobSpec.lookahead_steps; 0, the default, leaves the field out).

--spare_groups N offers each step N groups over its batch, which is then the first
prompts to come back (JobSpec.spare_groups_per_step; 0, the default, leaves it out).

--warm_up_verifiers 0 sends no verifier warm-ups while the warm start trains
(JobSpec.warm_up_verifiers, on by default), for comparing the first RL steps.

--timed_ms MIN,MAX sets the timing stage's budgets (TimingProtocol's
min_timed_ms and max_timed_ms; the verifier's defaults when absent).
"""

import argparse
import json
import os
import sys


def stems(folder):
    return sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernelbench", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warm", type=int, default=10)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--staleness", type=int, default=1)
    parser.add_argument("--lookahead_steps", type=int, default=0,
                        help="JobSpec.lookahead_steps: later steps whose groups are sampled "
                             "while a step's batch is collected")
    parser.add_argument("--spare_groups", type=int, default=0,
                        help="JobSpec.spare_groups_per_step: groups offered over each batch")
    parser.add_argument("--heldout", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--train", type=int, default=0)
    parser.add_argument("--sft_lr", type=float, default=1e-5)
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--micro", type=int, default=1)
    parser.add_argument("--min_lr_ratio", type=float, default=0.1)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--eval_every", type=int, default=5)
    parser.add_argument("--timed_ms", default="")
    parser.add_argument("--stop_below_loss", type=float, default=0.0)
    parser.add_argument("--log_samples", type=int, default=0)
    parser.add_argument("--warm_up_verifiers", type=int, choices=(0, 1), default=1,
                        help="JobSpec.warm_up_verifiers: 0 sends no warm-ups during the warm start")
    parser.add_argument("--turns", type=int, default=1,
                        help="multi_turn.max_turns (issue 24); 1 is single-turn")
    args = parser.parse_args()

    train, heldout = [], []
    for level in ("level1", "level2"):
        solved = set(stems(os.path.join(args.kernelbench, "solutions", level)))
        train += [f"{level}/{s}" for s in sorted(solved)]
        if level == "level1":
            heldout = [f"{level}/{s}" for s in stems(os.path.join(args.kernelbench, level))
                       if s not in solved][: args.heldout]
    if args.train > 0:
        def size(name):
            return os.path.getsize(os.path.join(args.kernelbench, "solutions", name + ".py"))
        train = sorted((t for t in train if t.startswith("level1/")), key=size)[: args.train]
    batch = args.prompts * args.group
    job = {
        "name": "e2e-qwen2.5-coder-1.5b-shape",
        "model_path": args.model,
        "tasks": {"kernelbench_dir": args.kernelbench, "include": train + heldout,
                  "heldout": heldout},
        "algorithm": "ALGORITHM_GRPO",
        "warm_start_steps": args.warm,
        "total_steps": args.steps,
        "prompts_per_step": args.prompts,
        "grpo": {"group_size": args.group},
        "sampling": {"max_new_tokens": args.tokens, "temperature": args.temperature, "seed": args.seed},
        "sft": {"learning_rate": args.sft_lr, "stop_below_loss": args.stop_below_loss},
        "optimizer": {"learning_rate": args.lr, "batch_size": batch, "micro_batch_size": args.micro,
                      "bf16": True, "warmup_steps": 2, "min_lr_ratio": args.min_lr_ratio},
        "eval": {"every_steps": args.eval_every, "samples_per_task": 1},
        "checkpoint": {"every_steps": 1000},
        "max_staleness": args.staleness,
        "seed": args.seed,
    }
    if args.lookahead_steps < 0:
        parser.error(f"--lookahead_steps must be >= 0, not {args.lookahead_steps}")
    if args.lookahead_steps > 0:
        job["lookahead_steps"] = args.lookahead_steps
    if args.spare_groups < 0:
        parser.error(f"--spare_groups must be >= 0, not {args.spare_groups}")
    if args.spare_groups > 0:
        job["spare_groups_per_step"] = args.spare_groups
    if not args.warm_up_verifiers:
        job["warm_up_verifiers"] = False
    if args.turns > 1:
        job["multi_turn"] = {"max_turns": args.turns}
    if args.log_samples > 0:
        job["sample_log"] = {"per_step": args.log_samples}
    if args.timed_ms:
        parts = args.timed_ms.split(",")
        if len(parts) != 2:
            parser.error(f"--timed_ms takes MIN,MAX in milliseconds, not {args.timed_ms!r}")
        low, high = (float(x) for x in parts)
        job["verifier"] = {"timing": {"min_timed_ms": low, "max_timed_ms": high}}
    json.dump(job, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
