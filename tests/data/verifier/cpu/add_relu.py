# relu(x + bias) with the bias built exactly as the reference builds it, so
# the same seed gives the same values (task: kforge-mini level2/1_AddReLU).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.clamp_min(x + self.bias, 0.0)
