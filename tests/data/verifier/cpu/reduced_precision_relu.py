# Not an attack: a ReLU whose result carries a relative error of up to 3e-3
# that changes from call to call, as reduced-precision arithmetic summed in a
# run-dependent order would. Within the bf16 tolerance that a task allowing
# reduced precision grants on every call, timed calls included; beyond
# fp32's.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        scale = 1.0 + ((self.calls % 7) - 3) * 1e-3
        return torch.clamp(x, min=0.0) * scale
