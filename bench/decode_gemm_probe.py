#!/usr/bin/env python3
"""The GEMMs of one decode step of the Qwen2.5-Coder-1.5B shape at batches 1
and 64, over 28 distinct weights (one per layer, so no weight is still in L2
when it is read again) replayed from a CUDA graph as the decode step replays
them, in the ways LibTorch can spell them: with the residual accumulated
(beta = 1, what kforge does), into a fresh output then added, and plain.
Prints us per GEMM and the bandwidth of the weight bytes."""
import torch
import torch.nn.functional as F

from graph_timing import graphed_us

LAYERS = 28


def main():
    torch.manual_seed(0)
    dev, dt = 'cuda', torch.bfloat16
    for batch in (1, 64):
        print(f'batch {batch}')
        for name, out_features, in_features in (('qkv', 2048, 1536), ('o_proj', 1536, 1536),
                                                ('gate_up', 17920, 1536), ('down', 1536, 8960)):
            ws = [torch.randn(out_features, in_features, device=dev, dtype=dt) * 0.02
                  for _ in range(LAYERS)]
            x = torch.randn(batch, in_features, device=dev, dtype=dt)
            residual = torch.randn(batch, out_features, device=dev, dtype=dt)
            out = torch.empty(batch, out_features, device=dev, dtype=dt)
            gb = ws[0].numel() * 2 / 1e9
            variants = {
                'linear': lambda i: F.linear(x, ws[i]),
                'mm out=': lambda i: torch.mm(x, ws[i].t(), out=out),
                'addmm_ beta=1': lambda i: residual.addmm_(x, ws[i].t()),
                'linear + add_': lambda i: residual.add_(F.linear(x, ws[i])),
            }
            for label, fn in variants.items():
                us = graphed_us(fn, LAYERS)
                print(f'  {name:8s} {label:14s} {us:7.2f} us  {gb / us * 1e6:6.0f} GB/s')


if __name__ == '__main__':
    main()
