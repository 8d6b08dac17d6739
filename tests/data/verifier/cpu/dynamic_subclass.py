# Attack T3, hidden from the static check: the Tensor subclass is made at run
# time with type() (no class statement subclasses torch.Tensor) and built by
# calling it on the output (no as_subclass or _make_subclass in the source).
import torch
import torch.nn as nn

Deferred = type("Deferred", (torch.Tensor,), {})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return Deferred(torch.clamp(x, min=0.0))
