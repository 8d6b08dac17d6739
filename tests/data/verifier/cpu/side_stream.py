# Attack: do the work on a side stream so that an event-only timer on the
# default stream sees almost nothing.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stream = torch.cuda.Stream()

    def forward(self, x):
        with torch.cuda.stream(self.stream):
            out = torch.clamp(x, min=0.0)
        return out
