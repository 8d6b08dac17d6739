import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS normalisation over the last dimension, without a learned scale."""

    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)


rows = 128
hidden = 512


def get_inputs():
    return [torch.randn(rows, hidden)]


def get_init_inputs():
    return [1e-6]
