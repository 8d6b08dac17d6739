#!/usr/bin/env python3
"""Decode attention of the Qwen2.5-Coder-1.5B shape (12 query heads, 2 kv
heads, head_dim 128) over 28 distinct per-layer caches, replayed from a CUDA
graph as a decode step replays it, in the ways LibTorch can spell it:

- sdpa: what kforge runs, scaled_dot_product_attention over the cache's
  [rows, kv_heads, span, D] view with the query heads folded per kv head and
  an additive [rows, 1, 1, span] mask, with each backend LibTorch offers;
- flash varlen: aten::_flash_attention_forward with cu_seqlens_k at each
  row's slot and seqused_k its length, over a token-major cache
  [rows, max_len, kv_heads, D] (no mask).

Prints us per layer call, the bandwidth of the keys and values read, and the
largest difference from the math reference."""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from graph_timing import graphed_us

LAYERS = 28
H, KVH, D = 12, 2, 128


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--rows', type=int, default=64)
    parser.add_argument('--keys', type=int, default=1024, help='mean cached length')
    parser.add_argument('--max-len', type=int, default=2048)
    parser.add_argument('--span-bucket', type=int, default=256)
    args = parser.parse_args()
    torch.manual_seed(0)
    dev, dt = 'cuda', torch.bfloat16
    n, max_len = args.rows, args.max_len
    print(torch.__version__, torch.cuda.get_device_name())
    print(torch.ops.aten._flash_attention_forward.default._schema)
    lengths = torch.randint(args.keys - 64, args.keys + 64, (n,), device=dev)
    span = min(max_len, (int(lengths.max()) + 1 + args.span_bucket - 1)
               // args.span_bucket * args.span_bucket)
    kv_bytes = int(lengths.sum() + n) * KVH * D * 2 * 2
    # Head-major caches (kforge's layout) and the same values token-major.
    caches = [torch.randn(2, n, KVH, max_len, D, device=dev, dtype=dt) for _ in range(LAYERS)]
    token_major = [c.transpose(2, 3).contiguous() for c in caches]
    q = torch.randn(n, H, D, device=dev, dtype=dt)
    key_pos = torch.arange(span, device=dev)
    allowed = key_pos[None, :] <= lengths[:, None]
    mask = torch.zeros(n, 1, 1, span, device=dev, dtype=dt).masked_fill_(~allowed[:, None, None],
                                                                          float('-inf'))
    folded = q.view(n, KVH, H // KVH, D)

    def sdpa(i):
        k = caches[i][0, :, :, :span]
        v = caches[i][1, :, :, :span]
        return F.scaled_dot_product_attention(folded, k, v, attn_mask=mask)

    cu_q = torch.arange(n + 1, device=dev, dtype=torch.int32)
    cu_k = (torch.arange(n + 1, device=dev, dtype=torch.int32) * max_len).contiguous()
    used = (lengths + 1).to(torch.int32)

    def flash(i):
        k = token_major[i][0].view(n * max_len, KVH, D)
        v = token_major[i][1].view(n * max_len, KVH, D)
        out = torch.ops.aten._flash_attention_forward(q, k, v, cu_q, cu_k, 1, span, 0.0, False,
                                                      False, seqused_k=used)[0]
        return out

    # Reference in float32.
    ref = []
    for i in (0, LAYERS - 1):
        k = caches[i][0, :, :, :span].float()
        v = caches[i][1, :, :, :span].float()
        s = folded.float() @ k.transpose(-1, -2) / D ** 0.5 + mask.float()
        ref.append((s.softmax(-1) @ v).reshape(n, H, D))

    def check(fn):
        return max(float((fn(i).reshape(n, H, D).float() - r).abs().max())
                   for i, r in zip((0, LAYERS - 1), ref))

    print(f'rows {n}, mean keys {args.keys}, span {span}, kv MB per layer {kv_bytes / 1e6:.1f}')
    for label, backend in (('sdpa default', None), ('sdpa cudnn', SDPBackend.CUDNN_ATTENTION),
                           ('sdpa efficient', SDPBackend.EFFICIENT_ATTENTION),
                           ('sdpa math', SDPBackend.MATH)):
        try:
            if backend is None:
                err, us = check(sdpa), graphed_us(sdpa, LAYERS)
            else:
                with sdpa_kernel(backend):
                    err, us = check(sdpa), graphed_us(sdpa, LAYERS)
            print(f'  {label:16s} {us:7.2f} us  {kv_bytes / us / 1e3:6.0f} GB/s  max err {err:.3g}')
        except Exception as e:  # noqa: BLE001 - a probe reports what does not run
            print(f'  {label:16s} failed: {str(e).splitlines()[0][:160]}')
    try:
        err, us = check(flash), graphed_us(flash, LAYERS)
        print(f'  {"flash varlen":16s} {us:7.2f} us  {kv_bytes / us / 1e3:6.0f} GB/s  max err {err:.3g}')
    except Exception as e:  # noqa: BLE001
        print(f'  flash varlen failed: {str(e).splitlines()[0][:300]}')


if __name__ == '__main__':
    main()
