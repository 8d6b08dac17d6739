# Softmax over dim 1 written out: subtract the row max, exponentiate,
# normalise (task: KernelBench level1/23_Softmax).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        row_max = torch.amax(x, dim=1, keepdim=True)
        e = torch.exp(x - row_max)
        return e / torch.sum(e, dim=1, keepdim=True)
