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

So every callable the candidate's classes bind (any name: torch calls a
module's _apply and forward, the interpreter its special methods), and
every hook on its model or torch's global module hooks, must be a function
whose code is the candidate's file, or a class. Allowed besides: the code
that the standard library's class makers generate for the candidate
(namedtuple's, typing's, enum's, abc's, functools.total_ordering's). And a
class made after the candidate's module began to load, whatever its
__module__ says (types.new_class names "types"), binds none of the C-level
callables that run a library's code with arguments chosen beforehand: a
functools.partial, a method bound to an object, operator's getters, a slot
of another name (__setattr__ = dict.__setitem__). Libraries that import
lazily make classes then too, with methods of their own files.

Standard library only; torch is imported when there is a model.
"""

import functools
import operator
import os
import types
import weakref

_FunctionType, _MethodType = types.FunctionType, types.MethodType
# The class makers whose methods a candidate's class may carry.
_CLASS_MAKERS = tuple(os.path.join(*parts) for parts in (
    ("collections", "__init__.py"), ("typing.py",), ("enum.py",), ("abc.py",),
    ("functools.py",)))
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks",
               "_state_dict_pre_hooks", "_state_dict_hooks", "_load_state_dict_pre_hooks",
               "_load_state_dict_post_hooks")
# Read past any class's own: the real attributes, no code of the candidate's.
_type_dict = type.__dict__["__dict__"].__get__
_type_module = type.__dict__["__module__"].__get__
_type_name = type.__dict__["__name__"].__get__
_subclasses = type.__subclasses__
_getweakrefs = weakref.getweakrefs
# Callables that carry their target and arguments, or a bound object: called
# by a slot, they run it with no frame of the caller's.
_CARRIERS = (functools.partial, functools.partialmethod, types.MethodType,
             types.MethodWrapperType, operator.attrgetter, operator.itemgetter,
             operator.methodcaller)
# Descriptors that call the function they wrap: judged by it.
_WRAPPING = (functools.cached_property, functools.singledispatchmethod)
_SLOT_DESCRIPTORS = (types.WrapperDescriptorType, types.MethodDescriptorType,
                     types.ClassMethodDescriptorType)


def _carrier(value, name):
    """Whether `value`, bound as `name`, carries its target and arguments
    or an object of its own: a partial, a bound method (a dict's
    __setitem__; not a module's function, nor a class's, as enum binds
    object.__new__), operator's getters, a slot bound as another special
    method (enum binds int.__repr__ as IntEnum's _value_repr_, no slot)."""
    if isinstance(value, _CARRIERS):
        return True
    if type(value) is types.BuiltinMethodType:
        # torch's functions (torch.matmul) have no object of their own.
        bound = value.__self__
        return bound is not None and not isinstance(bound, (types.ModuleType, type))
    return (isinstance(value, _SLOT_DESCRIPTORS) and value.__name__ != name
            and name.startswith("__") and name.endswith("__"))


def _called_by_others(name):
    """Names the interpreter (special methods) or torch (forward) calls."""
    return isinstance(name, str) and (name == "forward"
                                      or (name.startswith("__") and name.endswith("__")))


def frameless_callbacks(obj):
    """What of `obj`'s weak references calls back something that is not a
    Python function: dropped by the harness, `obj` runs it with no frame of
    the caller's, in the harness's frames (a red team's partial(next,
    itertools.starmap(functools.update_wrapper, ...)) on a tensor it was
    handed read operator.attrgetter so). A Python function runs in a frame
    of its own, which the call window and the guards judge."""
    found = []
    for ref in _getweakrefs(obj):
        callback = ref.__callback__
        if callback is None:
            continue
        function = callback.__func__ if type(callback) is _MethodType else callback
        if type(function) is not _FunctionType:
            found.append(_described(callback))
    return found


def _described(value):
    kind = type(value)
    return f"{_type_module(kind)}.{_type_name(kind)}"


class OwnCode:
    def __init__(self, candidate_file, kind_of):
        """kind_of: audit.Audit._kind, a code file's kind ("candidate",
        "generated", "stdlib", ...)."""
        self.candidate_file = os.path.abspath(candidate_file)
        self.kind_of = kind_of
        # Made before this candidate's module ran (the libraries', and
        # another candidate's in a process that served several: the
        # harness's own tests). Held, so no id is reused.
        self.before, self._held = set(), []
        self._held = self.classes()
        self.before = {id(cls) for cls in self._held}
        self._torch_facts = None  # see _torch

    def _torch(self):
        """What the hook checks read of torch, found once (they run after
        every call): torch's directory, the real instance dict of a module,
        the names of torch's global module hook dicts (each read afresh)."""
        if self._torch_facts is None:
            import torch
            shared = torch.nn.modules.module
            self._torch_facts = (
                os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
                torch.nn.Module.__dict__["__dict__"].__get__, torch.nn.Module, shared,
                tuple(name for name in vars(shared) if name.startswith("_global")
                      and "hook" in name))
        return self._torch_facts

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

    def decorates_own(self, value):
        """A library's closure over a function of the candidate's: what a
        decorator (@torch.no_grad(), custom_fwd) makes of it, which calls it
        (a frame of the candidate's) and reads nothing by name for it."""
        if type(value) is not _FunctionType:
            return False
        for cell in value.__closure__ or ():
            try:
                held = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if self.is_own(held) or self.decorates_own(held):
                return True
        return False

    def classes(self):
        """Every class made since this candidate's module began to load
        (all of them, before it did), wherever it is held."""
        seen, stack, found = set(), [object], []
        while stack:
            for cls in _subclasses(stack.pop()):
                if id(cls) in seen:
                    continue
                seen.add(id(cls))
                stack.append(cls)
                if id(cls) not in self.before:
                    found.append(cls)
        return found

    def foreign_methods(self):
        """'Class.name (what it is)' for each callable a class of the
        candidate's binds that is not a function of its own, and each
        frameless carrier any other class made since it loaded binds."""
        found = []
        for cls in self.classes():
            module = _type_module(cls)
            own = type(module) is str and module == "candidate"
            for name, value in list(_type_dict(cls).items()):
                kind = type(value)
                if kind in (staticmethod, classmethod):
                    parts = [value.__func__]
                elif kind is property:
                    parts = [p for p in (value.fget, value.fset, value.fdel) if p is not None]
                elif kind in _WRAPPING:
                    parts = [value.func]
                else:
                    parts = [value]
                for part in parts:
                    # A candidate's class binds no library's Python function
                    # as a special method or forward either (called by a
                    # slot or by torch, it reads for whoever triggered it),
                    # but a library's decorator of its own function.
                    bad = _carrier(part, name) or (
                        own and type(part) is _FunctionType and _called_by_others(name)
                        and not self.is_own(part) and not self.decorates_own(part))
                    if bad:
                        found.append(f"{_type_name(cls)}.{name} ({_described(part)})")
        return found

    def _torchs(self, hook):
        """A hook torch registered itself (LazyLinear's bound
        _infer_parameters, weight_norm's WeightNorm object, a _WrappedHook
        of such): torch's function, or an object of torch's class that
        carries nothing (what it wraps, judged the same way)."""
        root = self._torch()[0]
        function = hook.__func__ if type(hook) is _MethodType else hook
        if type(function) is _FunctionType:
            return os.path.abspath(function.__code__.co_filename).startswith(root)
        module = _type_module(type(hook))
        if not (type(module) is str and module.startswith("torch.")) or _carrier(hook, ""):
            return False
        wrapped = getattr(hook, "__dict__", {}).get("hook")
        return wrapped is None or self.is_own(wrapped) or self._torchs(wrapped)

    def foreign_hooks(self, model):
        """'where (what it is)' for each hook on the model's modules, or
        on torch's global module hooks, that is neither a function of the
        candidate's nor torch's own; and each module, parameter or buffer
        of the model with a frameless weak-reference callback (the harness
        drops a model it rebuilds)."""
        _, module_dict, module_type, shared, global_hooks = self._torch()
        found = []
        stack, seen = [model] if isinstance(model, module_type) else [], set()
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
                              if not (self.is_own(h) or self._torchs(h))]
            for held in [module] + [t for name in ("_parameters", "_buffers")
                                    if isinstance(own.get(name), dict)
                                    for t in list(own[name].values()) if t is not None]:
                found += [f"a weak reference's callback ({c})"
                          for c in frameless_callbacks(held)]
            children = own.get("_modules")
            if isinstance(children, dict):
                stack += [m for m in list(children.values()) if isinstance(m, module_type)]
        for name in global_hooks:
            hooks = vars(shared).get(name)
            if isinstance(hooks, dict):
                found += [f"torch's {name} ({_described(h)})" for h in list(hooks.values())
                          if not (self.is_own(h) or self._torchs(h))]
        return found
