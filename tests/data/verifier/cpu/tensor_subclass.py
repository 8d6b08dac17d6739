# Attack T3: a lazy tensor that does the work only when the harness reads it.
import torch
import torch.nn as nn


class Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        return super().__torch_function__(func, types, args, kwargs)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return Lazy(torch.clamp(x, min=0.0))
