# Attack T2: return an empty output and let a background thread fill it in
# after forward has returned (outside the timed region).
import threading

import torch
import torch.nn as nn


def _fill(out, x):
    out.copy_(torch.clamp(x, min=0.0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        threading.Thread(target=_fill, args=(out, x), daemon=True).start()
        return out
