# torch's own FakeCopyMode, a TorchFunctionMode, reached by a name that is
# only ever a string (functools.update_wrapper reads it from its own frame)
# and pushed for good at load: on every clone anyone makes, the harness's
# copies of the outputs after the clock included, it calls a hook first. A
# red team's hook (a frameless C-level chain) ran the matmul there, into an
# output returned empty (4.75x, no flag). Here the hook does nothing; the
# push alone is the attack's first step.
import functools
import itertools

import torch
import torch.nn as nn


class _Slots(dict):
    pass


# update_wrapper's setattr lands as an item. (Bound after the class
# statement, which the static check now refuses in a class body.)
_Slots.__setattr__ = dict.__setitem__


def _fetch(owner, name):
    slots = _Slots()
    functools.update_wrapper(slots, owner, assigned=(name,), updated=())
    return slots[name]


class _Holder:
    # The mode clones from_tensor(tensor): here nn.Identity, the tensor itself.
    from_tensor = property(functools.partial(next, itertools.repeat(nn.Identity())))


_mode = _fetch(_fetch(_fetch(torch, "_subclasses"), "fake_tensor"), "FakeCopyMode")(_Holder())
_mode.__enter__()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.0)
