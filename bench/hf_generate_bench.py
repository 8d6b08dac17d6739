#!/usr/bin/env python3
"""Hugging Face generate() on the same checkpoint and workload as
build/bin/kforge_rollout_bench: the side-by-side baseline of issue #4.

  # a random checkpoint with a real model's shapes, bf16 safetensors
  hf_generate_bench.py --make qwen2.5-coder-1.5b /tmp/models/q15

  # B prompts of P tokens (the PromptToken formula of rollout_bench.cc),
  # sampling at temperature 1, N new tokens with EOS ignored
  hf_generate_bench.py --checkpoint /tmp/models/q15 --batches 1,16,64,256 \
      --prompt-tokens 512 --new-tokens 1024

Needs torch and transformers (the GPU machine has them).
"""

import argparse
import sys
import time

import torch

SHAPES = {
    # config.json of Qwen/Qwen2.5-Coder-1.5B and -3B (weights random).
    "qwen2.5-coder-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                               num_attention_heads=12, num_key_value_heads=2),
    "qwen2.5-coder-3b": dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                             num_attention_heads=16, num_key_value_heads=2),
}


def make(name, out):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    config = Qwen2Config(vocab_size=151936, max_position_embeddings=32768, rope_theta=1e6,
                         rms_norm_eps=1e-6, tie_word_embeddings=True, torch_dtype="bfloat16",
                         bos_token_id=151643, eos_token_id=151643, **SHAPES[name])
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    print(f"wrote {name} ({sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters) to {out}")


def prompt_token(b, j, vocab):
    return (b * 7919 + j * 104729 + 17) % (vocab - 1) + 1


def sync():
    torch.cuda.synchronize()


def run(checkpoint, batches, prompt_len, new_tokens):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.bfloat16,
                                                 attn_implementation="sdpa").cuda().eval()
    vocab = model.config.vocab_size
    print(f"transformers generate(), {checkpoint}, prompt {prompt_len}, new tokens {new_tokens}")
    print(f"{'batch':>6} {'total s':>10} {'TTFT s':>10} {'out tok/s':>12} {'peak GiB':>9}")
    for batch in batches:
        ids = torch.tensor([[prompt_token(b, j, vocab) for j in range(prompt_len)]
                            for b in range(batch)], device="cuda")
        mask = torch.ones_like(ids)
        common = dict(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0,
                      top_p=1.0, top_k=0, pad_token_id=0)
        with torch.no_grad():
            model.generate(**common, max_new_tokens=2, min_new_tokens=2)  # warm-up
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            sync()
            t0 = time.perf_counter()
            model.generate(**common, max_new_tokens=1, min_new_tokens=1)
            sync()
            ttft = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = model.generate(**common, max_new_tokens=new_tokens, min_new_tokens=new_tokens)
            sync()
            total = time.perf_counter() - t0
        generated = (out.shape[1] - prompt_len) * batch
        peak = torch.cuda.max_memory_allocated() / 2**30
        print(f"{batch:>6} {total:>10.2f} {ttft:>10.3f} {generated / total:>12.0f} {peak:>9.1f}",
              flush=True)
        del out


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--make", nargs=2, metavar=("SHAPE", "OUT"))
    parser.add_argument("--checkpoint")
    parser.add_argument("--batches", default="1,16,64,256")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=1024)
    args = parser.parse_args()
    if args.make:
        if args.make[0] not in SHAPES:
            sys.exit(f"--make: unknown shape {args.make[0]!r}; known: {', '.join(SHAPES)}")
        make(*args.make)
    if args.checkpoint:
        run(args.checkpoint, [int(b) for b in args.batches.split(",")], args.prompt_tokens,
            args.new_tokens)


if __name__ == "__main__":
    main()
