# Right values, wrong dtype: float64 for a float32 task.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(x.double(), min=0.0)
