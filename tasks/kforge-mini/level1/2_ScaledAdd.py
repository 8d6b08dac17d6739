import torch
import torch.nn as nn


class Model(nn.Module):
    """out = alpha * x + y (axpy)."""

    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, y):
        return self.alpha * x + y


n = 1 << 18


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return [0.5]
