# ReLU, correct but far slower than eager (task: kforge-mini level1/1_ReLU):
# one clamp per 64 elements, thousands of small operations a call.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        chunks = [torch.clamp(c, min=0.0) for c in x.reshape(-1).split(64)]
        return torch.cat(chunks).view_as(x)
