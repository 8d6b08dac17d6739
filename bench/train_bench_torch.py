#!/usr/bin/env python3
"""The learner's GRPO step written in PyTorch Python: the side-by-side
baseline of build/bin/kforge_train_bench (issue #5).

  train_bench_torch.py --checkpoint DIR --sequences 16 --micro 4 \
      --prompt-tokens 512 --completion-tokens 512 --steps 5

The same work as the C++ benchmark: transformers' Qwen2/Llama model in
bf16 (SDPA attention), logits only at completion positions, float32
log-softmax, the clipped GRPO loss (clip 0.2 / 0.28) with token-level
averaging over the step's tokens, micro-batch accumulation, gradient
clipping at 1, AdamW (foreach) on float32 master copies of the bf16
parameters. Needs torch and transformers (the GPU machine has them).
"""

import argparse
import math
import time

import torch


def prompt_token(b, j, vocab):
    return (b * 7919 + j * 104729 + 17) % (vocab - 1) + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--sequences", type=int, default=16)
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--completion-tokens", type=int, default=512)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--fused", action="store_true",
                    help="torch.optim.AdamW(fused=True) instead of the default foreach=True")
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(args.checkpoint, torch_dtype=torch.bfloat16,
                                                 attn_implementation="sdpa").cuda()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    masters = [p.detach().float().clone().requires_grad_(True) for p in params]
    opt = torch.optim.AdamW(masters, lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                            **({"fused": True} if args.fused else {"foreach": True}))
    vocab = model.config.vocab_size
    n, p, c = args.sequences, args.prompt_tokens, args.completion_tokens
    ids = torch.tensor([[prompt_token(b, j, vocab) for j in range(p + c)] for b in range(n)],
                       device="cuda")
    old = torch.full((n, c), -math.log(vocab), device="cuda")
    adv = torch.tensor([1.0 if b % 2 == 0 else -1.0 for b in range(n)], device="cuda")
    adv = adv[:, None].expand(n, c)

    def step():
        for q in params:
            q.grad = None
        tokens = n * c  # token-level average over the whole step
        for s in range(0, n, args.micro):
            x = ids[s:s + args.micro]
            hidden = model.model(input_ids=x).last_hidden_state[:, p - 1:p + c - 1]
            logits = model.lm_head(hidden).float()
            logp = torch.log_softmax(logits, -1).gather(-1, x[:, p:, None]).squeeze(-1)
            ratio = torch.exp(logp - old[s:s + args.micro])
            a = adv[s:s + args.micro]
            loss = -torch.min(ratio * a, torch.clamp(ratio, 0.8, 1.28) * a).sum() / tokens
            loss.backward()
        for m, q in zip(masters, params):
            m.grad = q.grad.float()
        torch.nn.utils.clip_grad_norm_(masters, 1.0, foreach=True)
        opt.step()
        with torch.no_grad():
            for m, q in zip(masters, params):
                q.copy_(m)

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**30
    tokens = args.steps * n * (p + c)
    print(f"{'impl':<10} {'dtype':<9} {'sequences':>9} {'micro':>6} {'prompt':>8} {'complete':>8} "
          f"{'s/step':>12} {'train tok/s':>14} {'peak GiB':>10}")
    impl = "pytorch-f" if args.fused else "pytorch"
    print(f"{impl:<10} {'bfloat16':<9} {n:>9} {args.micro:>6} {p:>8} {c:>8} "
          f"{seconds / args.steps:>12.3f} {tokens / seconds:>14.0f} {peak:>10.1f}")


if __name__ == "__main__":
    main()
