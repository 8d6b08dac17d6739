# Attack S9: a tiled "kernel" without a tail mask. It processes the row in
# tiles of 512 columns and never writes the columns past the last full tile.
# The task's rows (4096) and the tiny rows (512) are multiples of 512, so it
# is right there; an odd row length leaves the tail at zero.
import torch
import torch.nn as nn

TILE = 512


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.zeros_like(x)
        covered = (x.shape[-1] // TILE) * TILE
        out[:, :covered] = torch.clamp(x[:, :covered], min=0.0)
        return out
