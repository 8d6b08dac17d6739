# Attack B3: a "fast path" that fails, swallowed by try/except, with PyTorch
# doing the work in the fallback.
import torch
import torch.nn as nn


def fast_relu(x):
    raise NotImplementedError("the custom kernel is not written yet")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        try:
            return fast_relu(x)
        except Exception:
            return torch.relu(x)
