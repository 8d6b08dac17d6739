#!/usr/bin/env python3
"""Reference logits from Hugging Face transformers for kforge's decoder tests.

kforge's LibTorch decoder (model/transformer/) must compute what transformers
computes. This script runs transformers on a checkpoint and writes what the
C++ test tests/unit/model/transformer/hf_reference_test.cc compares against.
It needs torch and transformers (the GPU machine has them; the CPU dev
machine does not).

Modes:

  # A random checkpoint of one architecture (llama, qwen2, qwen3), tiny,
  # with every feature of its family (Llama 3 rope scaling, Qwen2 biases,
  # Qwen3 q/k norms and head_dim != hidden / heads):
  hf_reference_logits.py --make-random qwen3 /tmp/ref/models/qwen3 [--seed 0] [--dtype bfloat16]

  # transformers' float32 logits for a prompt and its greedy continuation:
  hf_reference_logits.py --checkpoint /tmp/ref/models/qwen3 --out /tmp/ref/qwen3.json \
      [--tokens 1,2,3] [--new-tokens 8] [--last-only]

  # Both, for all three architectures: OUT/models/<arch> and OUT/<arch>.json.
  hf_reference_logits.py --suite /tmp/ref

Then: KFORGE_HF_REFERENCE_DIR=/tmp/ref build/bin/kforge_transformer_tests \
          --gtest_filter='HfReference*'

The JSON holds: checkpoint (relative to the JSON's folder when inside it),
prompt, prompt_logits_start and prompt_logits (rows for positions
prompt_logits_start .. len(prompt)-1), greedy_tokens, and greedy_logits (row
i: the logits after prompt + greedy_tokens[:i], whose argmax is
greedy_tokens[i]), plus the versions used.
"""

import argparse
import json
import math
import os
import sys

ARCHITECTURES = ("llama", "qwen2", "qwen3")


def _import_torch_and_transformers():
    try:
        import torch
        import transformers
    except ImportError as error:
        sys.exit(f"hf_reference_logits.py needs torch and transformers: {error}")
    return torch, transformers


def tiny_config_fields(arch):
    """config.json fields for a tiny model of `arch`, as its family spells them."""
    fields = {
        "vocab_size": 256,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    if arch == "llama":
        # head_dim 16, theta 5e5: wavelengths 6, 33, 171, 896, ... With an
        # original context of 256 the first two are kept, the third is
        # interpolated and the rest divided by the factor: all three bands.
        fields.update(rope_theta=500000.0, tie_word_embeddings=False, attention_bias=False,
                      mlp_bias=False,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 256})
    elif arch == "qwen2":
        fields.update(rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False,
                      rope_scaling=None)
    elif arch == "qwen3":
        fields.update(rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False,
                      attention_bias=False, head_dim=32, rope_scaling=None)
    else:
        raise ValueError(f"unknown architecture {arch!r}; one of {ARCHITECTURES}")
    return fields


def _config_class(transformers, arch):
    names = {"llama": "LlamaConfig", "qwen2": "Qwen2Config", "qwen3": "Qwen3Config"}
    cls = getattr(transformers, names[arch], None)
    if cls is None:
        sys.exit(f"transformers {transformers.__version__} has no {names[arch]} "
                 "(Qwen3 needs transformers >= 4.51)")
    return cls


def _randomize(torch, model, seed):
    """Weights that make every tensor matter: transformers' own init zeroes
    biases and sets norms to ones, which would hide a decoder that ignores
    them."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator, dtype=torch.float32)
            if name.endswith(".bias"):
                value = 0.1 * noise
            elif param.dim() == 1:  # RMSNorm scales
                value = 1.0 + 0.1 * noise
            elif "embed_tokens" in name:
                value = noise
            else:  # [out, in]
                value = noise / math.sqrt(param.shape[1])
            param.copy_(value.to(param.dtype))


def _ensure_classic_fields(out_dir, fields):
    """Newer transformers may move rope_theta / rope_scaling into
    rope_parameters when saving; keep the classic fields kforge reads too."""
    path = os.path.join(out_dir, "config.json")
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    for key in ("rope_theta", "rope_scaling", "head_dim", "tie_word_embeddings"):
        if key in fields and key not in saved:
            saved[key] = fields[key]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(saved, f, indent=2)


def make_random(arch, out_dir, seed, dtype_name):
    torch, transformers = _import_torch_and_transformers()
    fields = tiny_config_fields(arch)
    config = _config_class(transformers, arch)(**fields)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.float32)
    _randomize(torch, model, seed)
    model = model.to(getattr(torch, dtype_name))
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir)
    _ensure_classic_fields(out_dir, fields)
    names = sorted(f for f in os.listdir(out_dir) if f.endswith(".safetensors"))
    if not names:
        sys.exit(f"save_pretrained wrote no *.safetensors into {out_dir}")
    print(f"wrote random {arch} ({dtype_name}) checkpoint to {out_dir}: {', '.join(names)}")


def _default_prompt(vocab_size, length=12, seed=1234):
    # A fixed pseudo-random prompt (a linear congruential sequence), so
    # references are reproducible without a tokenizer.
    tokens, state = [], seed
    for _ in range(length):
        state = (1103515245 * state + 12345) % (1 << 31)
        tokens.append(state % vocab_size)
    return tokens


def _load_float32(torch, transformers, checkpoint):
    # eager attention: transformers' plain matmul-softmax, the reference path.
    model = transformers.AutoModelForCausalLM.from_pretrained(
        checkpoint, torch_dtype=torch.float32, attn_implementation="eager")
    return model.to(torch.float32).eval()


def reference(checkpoint, out_path, tokens, new_tokens, last_only):
    torch, transformers = _import_torch_and_transformers()
    if new_tokens < 1:
        sys.exit("--new-tokens must be at least 1")
    model = _load_float32(torch, transformers, checkpoint)
    vocab = model.config.vocab_size
    prompt = tokens if tokens else _default_prompt(vocab)
    if any(t < 0 or t >= vocab for t in prompt):
        sys.exit(f"token ids must lie in [0, {vocab})")
    with torch.no_grad():
        ids = torch.tensor([prompt], dtype=torch.long)
        prompt_logits = model(input_ids=ids).logits[0].float()
        sequence, greedy, greedy_logits = list(prompt), [], []
        for _ in range(new_tokens):
            # No cache: the reference must not depend on transformers' own cache.
            row = model(input_ids=torch.tensor([sequence], dtype=torch.long)).logits[0, -1]
            token = int(row.argmax())
            greedy.append(token)
            greedy_logits.append(row.float().tolist())
            sequence.append(token)
    start = len(prompt) - 1 if last_only else 0
    out_dir = os.path.dirname(os.path.abspath(out_path))
    ckpt = os.path.abspath(checkpoint)
    if os.path.commonpath([ckpt, out_dir]) == out_dir:
        ckpt = os.path.relpath(ckpt, out_dir)
    result = {
        "checkpoint": ckpt,
        "architecture": (model.config.architectures or [type(model).__name__])[0],
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "prompt": prompt,
        "prompt_logits_start": start,
        "prompt_logits": prompt_logits[start:].tolist(),
        "greedy_tokens": greedy,
        "greedy_logits": greedy_logits,
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f)
    print(f"wrote {out_path}: {len(prompt)} prompt tokens, greedy {greedy}")


def suite(out_dir, seed, dtype_name, new_tokens):
    for arch in ARCHITECTURES:
        model_dir = os.path.join(out_dir, "models", arch)
        make_random(arch, model_dir, seed, dtype_name)
        reference(model_dir, os.path.join(out_dir, f"{arch}.json"), None, new_tokens, False)


def _parse_tokens(text):
    if not text:
        return None
    try:
        return [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        sys.exit(f"--tokens must be comma-separated integers, got {text!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--make-random", nargs=2, metavar=("ARCH", "OUT_DIR"),
                      help=f"write a random tiny checkpoint; ARCH one of {', '.join(ARCHITECTURES)}")
    mode.add_argument("--checkpoint", metavar="DIR", help="a Hugging Face checkpoint folder")
    mode.add_argument("--suite", metavar="OUT_DIR",
                      help="random checkpoints of every architecture and their references")
    parser.add_argument("--out", metavar="FILE", help="JSON to write (with --checkpoint)")
    parser.add_argument("--tokens", help="prompt token ids, comma-separated (default: fixed)")
    parser.add_argument("--new-tokens", type=int, default=8, help="greedy tokens (default 8)")
    parser.add_argument("--last-only", action="store_true",
                        help="keep only the last prompt position's logits (large vocabularies)")
    parser.add_argument("--seed", type=int, default=0, help="random weights' seed")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                        help="dtype of random checkpoints' files (the reference runs in float32)")
    args = parser.parse_args()
    if args.make_random:
        arch, out_dir = args.make_random
        if arch not in ARCHITECTURES:
            parser.error(f"ARCH must be one of {', '.join(ARCHITECTURES)}, got {arch!r}")
        make_random(arch, out_dir, args.seed, args.dtype)
    elif args.checkpoint:
        if not args.out:
            parser.error("--checkpoint needs --out FILE.json")
        reference(args.checkpoint, args.out, _parse_tokens(args.tokens), args.new_tokens,
                  args.last_only)
    else:
        suite(args.suite, args.seed, args.dtype, args.new_tokens)


if __name__ == "__main__":
    main()
