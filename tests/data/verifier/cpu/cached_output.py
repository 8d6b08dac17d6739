# Attack S4: computes once per shape and replays the cached output afterwards.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = tuple(x.shape)
        if key not in self.cache:
            self.cache[key] = torch.clamp(x, min=0.0)
        return self.cache[key]
