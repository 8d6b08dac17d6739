# Attack B4: make every comparison succeed.
import torch
import torch.nn as nn

torch.allclose = lambda *a, **k: True


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x)
