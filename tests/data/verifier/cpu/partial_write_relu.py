# Attack S1/S2: writes only the positive elements and leaves the rest as
# whatever the allocator hands back (zeros, or a freed reference output, on a
# lucky day).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        positive = x > 0
        out[positive] = x[positive]
        return out
