import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x + bias), a bias-add fused with its activation."""

    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x + self.bias)


batch_size = 128
features = 1024


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
