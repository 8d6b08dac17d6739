"""What the candidate hands others to call must be code of its own.

The run-time checks (audit.py's hook and getattr guard, the call window)
judge an act by the frames on the stack: the candidate's file is the
candidate. A callable that is not a Python function of the candidate's
(functools.partial, a bound method of a dict, a library's function) runs
with no frame of the candidate's when torch or the interpreter calls it:
bound as a class's __del__ or __iter__, or registered as a module's forward
hook, it ran in the harness's frames and read what the guards let the
harness read. A red team's chains read the closure of a harness guard
(the live Audit), then the timer's frame locals: 2.47x and 3.86x on a
matmul, every output right.

So every callable the candidate's classes bind as special methods (and as
forward), and every hook on its model or torch's global module hooks, must
be a function whose code is the candidate's file. Allowed besides: the code
that the standard library's class makers generate for the candidate
(namedtuple's, typing's, enum's and abc's own methods).

Standard library only; torch is imported when there is a model.
"""

import os
import types

_FunctionType, _MethodType = types.FunctionType, types.MethodType
# The class makers whose methods a candidate's class may carry.
_CLASS_MAKERS = tuple(os.path.join(*parts) for parts in (
    ("collections", "__init__.py"), ("typing.py",), ("enum.py",), ("abc.py",)))
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks",
               "_state_dict_pre_hooks", "_state_dict_hooks", "_load_state_dict_pre_hooks",
               "_load_state_dict_post_hooks")
# Read past any class's own: the real attributes, no code of the candidate's.
_type_dict = type.__dict__["__dict__"].__get__
_type_module = type.__dict__["__module__"].__get__
_type_name = type.__dict__["__name__"].__get__
_subclasses = type.__subclasses__


def _described(value):
    kind = type(value)
    return f"{_type_module(kind)}.{_type_name(kind)}"


class OwnCode:
    def __init__(self, candidate_file, kind_of):
        """kind_of: audit.Audit._kind, a code file's kind ("candidate",
        "generated", "stdlib", ...)."""
        self.candidate_file = os.path.abspath(candidate_file)
        self.kind_of = kind_of
        # Made before this candidate's module ran (another candidate's, in
        # a process that served several: the harness's own tests).
        self.before = set()
        self.before = {id(cls) for cls in self.classes()}

    def is_own(self, value):
        """A function (or a method of one) of the candidate's file, or of
        code generated or made by a class maker for it."""
        if type(value) is _MethodType:
            value = value.__func__
        if type(value) is not _FunctionType:
            return False
        filename = value.__code__.co_filename
        return (self.kind_of(filename) in ("candidate", "generated")
                or filename.endswith(_CLASS_MAKERS))

    def classes(self):
        """Every class whose module is the candidate's (made by a class
        statement or by type() in its code, wherever it is held)."""
        seen, stack, found = set(), [object], []
        while stack:
            for cls in _subclasses(stack.pop()):
                if id(cls) in seen:
                    continue
                seen.add(id(cls))
                stack.append(cls)
                if _type_module(cls) == "candidate" and id(cls) not in self.before:
                    found.append(cls)
        return found

    def foreign_methods(self):
        """'Class.name (what it is)' for each special method or forward of
        a candidate's class that is not a function of its own."""
        found = []
        for cls in self.classes():
            for name, value in list(_type_dict(cls).items()):
                if not isinstance(name, str) or not (
                        name == "forward" or (name.startswith("__") and name.endswith("__"))):
                    continue
                kind = type(value)
                if kind in (staticmethod, classmethod):
                    parts = [value.__func__]
                elif kind is property:
                    parts = [p for p in (value.fget, value.fset, value.fdel) if p is not None]
                else:
                    parts = [value]
                for part in parts:
                    if callable(part) and not self.is_own(part):
                        found.append(f"{_type_name(cls)}.{name} ({_described(part)})")
        return found

    def foreign_hooks(self, model):
        """'where (what it is)' for each hook on the model's modules, or
        on torch's global module hooks, that is not a function of the
        candidate's."""
        import torch
        found = []
        module_dict = torch.nn.Module.__dict__["__dict__"].__get__
        stack, seen = [model] if isinstance(model, torch.nn.Module) else [], set()
        while stack:
            module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            own = module_dict(module)
            for name in _HOOK_DICTS:
                hooks = own.get(name)
                if isinstance(hooks, dict):
                    found += [f"{name} ({_described(h)})" for h in list(hooks.values())
                              if not self.is_own(h)]
            children = own.get("_modules")
            if isinstance(children, dict):
                stack += [m for m in list(children.values()) if isinstance(m, torch.nn.Module)]
        shared = vars(torch.nn.modules.module)
        for name, hooks in list(shared.items()):
            if name.startswith("_global") and "hook" in name and isinstance(hooks, dict):
                found += [f"torch's {name} ({_described(h)})" for h in list(hooks.values())
                          if not self.is_own(h)]
        return found
