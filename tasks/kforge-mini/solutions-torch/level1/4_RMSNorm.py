import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        mean_square = (x * x).sum(dim=-1, keepdim=True) / x.shape[-1]
        return x / torch.sqrt(mean_square + self.eps)
