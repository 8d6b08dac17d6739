"""Functions the harness relies on, captured before candidate code loads and
checked for replacement after it runs. Replacing any of them is reported
(HACK_PATCHED_FUNCTION) and fails the candidate.

Three kinds: the library functions on `_GUARDED` (clocks, comparisons,
tensor copies), the builtins module whole, and everything the harness's own
modules bind: each kforge_harness module's globals and each of its classes'
attributes whole (every one the object it was, none added), and each of
their functions' code, defaults and globals. The candidate runs in
the harness's interpreter, so a route to a harness module (a red team found
`torch.sys.modules` past the static check) would otherwise let it replace
the timer (`timing.Timer.one`), the launch record, or this check itself,
unseen: the runner's last look before each reply uses references bound
before the candidate loaded (candidate_runner.Runner.serve)."""

import builtins
import sys
import time
import types

import torch
import torch.nn.functional as F

from . import thread_watch

# (owner, attribute) pairs, resolved at capture time.
_GUARDED = [
    (time, "perf_counter"), (time, "perf_counter_ns"), (time, "time"), (time, "monotonic"),
    (torch, "allclose"), (torch, "isclose"), (torch, "equal"), (torch, "isfinite"),
    (torch, "isnan"), (torch, "manual_seed"), (torch, "empty"), (torch, "empty_like"),
    (torch, "zeros"), (torch, "randn"), (torch, "rand"), (torch, "frombuffer"),
    (torch, "get_num_threads"), (torch, "set_num_threads"), (torch, "no_grad"), (torch, "full"),
    (torch, "Generator"), (torch, "device"),
    (torch.Tensor, "clone"), (torch.Tensor, "copy_"), (torch.Tensor, "contiguous"),
    (torch.Tensor, "cpu"), (torch.Tensor, "numpy"), (torch.Tensor, "to"), (torch.Tensor, "view"),
    (torch.Tensor, "__eq__"), (torch.Tensor, "sub"), (torch.Tensor, "abs"),
    (torch.nn.Module, "__call__"), (torch.nn.Module, "to"), (torch.nn.Module, "eval"),
    (torch.cuda, "synchronize"), (torch.cuda, "Event"), (torch.cuda.Event, "record"),
    (torch.cuda.Event, "elapsed_time"), (torch.cuda.Event, "synchronize"),
    (F, "relu"), (F, "linear"), (F, "conv2d"), (F, "softmax"),
    *((builtins, name) for name in ("getattr", "setattr", "isinstance", "type", "vars", "len",
                                    "list", "tuple", "dict", "id", "iter", "next", "sorted",
                                    "sum", "min", "max", "abs", "float", "int", "str", "repr",
                                    "print", "object", "super", "__import__", "open")),
    # Wrapped by thread_watch.install (the names a Python version lacks
    # read None before and after).
    *(thread_watch.owner_of(dotted) for dotted in thread_watch.STARTERS),
]

# Global settings of torch that change how fast (or how precisely) the same
# work runs in this process, read through torch's C getters (where this
# torch has them) and compared by value: a red team widened the intra-op
# thread pool from the harness's 1 to 2, through a spelling the static
# check could not resolve, for 1.6-1.7x over an eager baseline timed on one
# thread. Setting one back before each reply would not undo the trials it
# sped up.
_STATE_GETTERS = [(name, getattr(torch._C, attr, None)) for name, attr in (
    ("num_threads", "get_num_threads"), ("num_interop_threads", "get_num_interop_threads"),
    ("default_dtype", "get_default_dtype"),
    ("deterministic_algorithms", "_get_deterministic_algorithms"),
    ("float32_matmul_precision", "_get_float32_matmul_precision"),
    ("cublas_allow_tf32", "_get_cublas_allow_tf32"),
    ("cudnn_allow_tf32", "_get_cudnn_allow_tf32"), ("cudnn_benchmark", "_get_cudnn_benchmark"),
    ("cudnn_deterministic", "_get_cudnn_deterministic"), ("cudnn_enabled", "_get_cudnn_enabled"),
    ("mkldnn_enabled", "_get_mkldnn_enabled"))]
_STATE = "state"  # the mode of a captured setting: compared by value

# torch's mode stacks: a mode on them sees every torch call on plain tensors,
# the harness's included. A red team pushed torch's own FakeCopyMode (its
# fake_mode a frameless C-level chain) and left each output empty: the
# harness's copy of the output, after the clock, ran the matmul (4.75x, no
# flag). Compared by value before every reply, and checked after every call
# of the candidate's (modes_pushed) before anything touches its outputs.
_MODE_STACKS = [(name, getattr(torch._C, attr, None)) for name, attr in (
    ("torch function modes", "_len_torch_function_stack"),
    ("torch dispatch modes", "_len_torch_dispatch_stack"))]
# The Python dispatcher likewise: switched on (a thread-local key), it runs
# the Python kernels registered on an operator (OpOverload.py_impl): a red
# team's, a frameless chain on aten::clone, ran the matmul in the harness's
# copy of an output returned empty (3.77x, no flag).
_include_set = getattr(torch._C, "_dispatch_tls_local_include_set", None)


def _python_keys(_include=_include_set, _repr=repr):
    """Whether a Python dispatch key is in this thread's local include set."""
    return _include is not None and "Python" in _repr(_include())


_MODE_STACKS.append(("Python dispatch keys", _python_keys))
_STATE_GETTERS += [(name, getter) for name, getter in _MODE_STACKS]


def modes_pushed(_stacks=tuple(_MODE_STACKS), _str=str):
    """"" when no torch function or dispatch mode is on the stacks and the
    Python dispatcher is off (as the harness runs), else which."""
    pushed = []
    for name, depth in _stacks:
        if depth is not None:
            n = depth()
            if n:
                pushed.append(name if n is True else f"{_str(n)} {name}")
    return ", ".join(pushed)

# Modules the reply goes out through, guarded whole: every global as it was,
# and none added. A red team set json.encoder.c_make_encoder to None and
# gave json.encoder a global `float` whose __repr__ appended "e-1": every
# float of every reply (the timings) reached the verifier ten times smaller,
# and no code of the candidate's ran after its module loaded.
_REPLY_PATH = ("json", "json.encoder", "json.decoder", "json.scanner", "struct", "socket",
               "array", "mmap", "os")
_DICT = "dict"  # the mode of a captured module: its globals, compared whole

# The harness's own modules and classes are guarded whole, each global and
# class attribute the object it was and none added, whatever its type: a
# red team leaked sys through enum.Enum._convert_ (which reads a module's
# __dict__ in enum's own frame), then set kforge_harness.timing._clone (a
# method descriptor, not a type this list once named) and gave the module a
# global `isinstance` shadowing the builtin, both C-level chains: each
# trial's matmul ran in the timer's input cloning, before its clock (8.2x,
# no flag). enum.global_enum writes a class's members into any module by
# name, no read needed. The builtins are guarded whole for the same reason
# (a shadow there reaches every module), and torch.Tensor's own attributes:
# a method added there shadows the C one for every tensor, the harness's
# calls on inputs before the clock and on outputs after it included.
_WHOLE = "whole"  # the mode of an object guarded whole: its dict, compared key by key
# What Python adds by itself: a module's warning registry, the slot names
# copyreg caches on a class the first time an instance is copied (torch
# 2.x's Tensor.__reduce_ex__ on Python 3.11+), a class's annotations dict
# made when first read.
_NOT_GUARDED = ("__warningregistry__", "__slotnames__", "__annotations__")


def _harness_entries():
    entries = []
    for module_name, module in sorted(sys.modules.items()):
        if module_name != "kforge_harness" and not module_name.startswith("kforge_harness."):
            continue
        entries.append((module, module_name, _whole(module), _WHOLE))
        for value in vars(module).values():
            if isinstance(value, types.FunctionType):
                entries += _function_state(value)
            if isinstance(value, type) and str(value.__module__) == module_name:
                entries.append((value, value.__name__, _whole(value), _WHOLE))
                for member in vars(value).values():
                    function = getattr(member, "__func__", member)
                    if isinstance(member, property):
                        function = member.fget
                    if isinstance(function, types.FunctionType):
                        entries += _function_state(function)
    return entries


def _whole(owner):
    return types.MappingProxyType({key: value for key, value in vars(owner).items()
                                   if key not in _NOT_GUARDED})


def _function_state(function):
    """A function replaced in place keeps its identity: its code, defaults
    and globals are compared too (a red team swapped Timer.one.__code__)."""
    return [(function, name, getattr(function, name), False)
            for name in ("__code__", "__defaults__", "__kwdefaults__", "__globals__")]


def capture():
    """An immutable snapshot: (owner, name, object, how it is read: False
    through getattr, True from the owner's own dict, "state" a setting's
    getter and its value) for every guarded name and setting."""
    return tuple([(owner, name, getattr(owner, name, None), False) for owner, name in _GUARDED]
                 + _harness_entries()
                 + [(builtins, "builtins", _whole(builtins), _WHOLE),
                    (torch.Tensor, "torch.Tensor", _whole(torch.Tensor), _WHOLE)]
                 + [(getter, name, getter(), _STATE) for name, getter in _STATE_GETTERS
                    if getter is not None]
                 + [(sys.modules[name], name, _globals(sys.modules[name]), _DICT)
                    for name in _REPLY_PATH if name in sys.modules])


def _globals(module):
    return types.MappingProxyType({key: value for key, value in vars(module).items()
                                   if not key.startswith("__")})


# The builtins it uses are bound as defaults (out of a candidate's reach
# without __defaults__, which the static check denies), so replacing
# builtins.getattr cannot blind it; it reports that replacement too.
def replaced(captured, _getattr=getattr, _vars=vars, _type=type, _missing=object(), _str=str,
             _state=_STATE, _dict=_DICT, _whole_mode=_WHOLE, _not_guarded=_NOT_GUARDED,
             _module_type=types.ModuleType, _modules=sys.modules):
    """Names of guarded functions that are no longer the captured objects,
    and settings no longer at their captured values."""
    out = []
    for owner, name, original, own_dict in captured:
        if own_dict is _state:
            now = owner()
            if now != original:
                out.append(f"torch's {name} setting ({_str(original)} -> {_str(now)})")
            continue
        if own_dict is _whole_mode or own_dict is _dict:
            # Compared key by key; a reply-path module's dunders are not
            # guarded (_globals), the rest as _NOT_GUARDED says.
            now = _vars(owner)
            for key, value in original.items():
                if now.get(key, _missing) is not value:
                    out.append(f"{name}.{key}")
            for key, value in now.items():
                if key in original or (key.startswith("__") if own_dict is _dict
                                       else key in _not_guarded):
                    continue
                # A submodule of a harness package imported since: exactly
                # a module, the one the import system holds under that name
                # (a module subclass can be called like a function).
                if (own_dict is _whole_mode and _type(value) is _module_type
                        and _type(owner) is _module_type and "__path__" in now
                        and _modules.get(f"{name}.{key}") is value):
                    continue
                out.append(f"{name}.{key} (added)")
            continue
        now = _vars(owner).get(name, _missing) if own_dict else _getattr(owner, name, None)
        if now is not original:
            owner_name = _getattr(owner, "__name__", None) or _getattr(_type(owner), "__name__", "?")
            out.append(f"{_str(owner_name)}.{name}")
    return out
