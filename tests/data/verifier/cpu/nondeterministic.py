# Attack T8-like: the answer drifts from call to call (an unsynchronised
# accumulation would do the same). Every third call is off by 1e-3.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        out = torch.clamp(x, min=0.0)
        if self.calls % 3 == 0:
            out = out + 1e-3
        return out
