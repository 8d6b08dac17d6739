# alpha * x + y written as y + alpha * x through torch.add's alpha
# (task: kforge-mini level1/2_ScaledAdd).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, y):
        return torch.add(y, x, alpha=self.alpha)
