"""What the stage-1 static check (static_check.py) knows of a candidate
module before judging it: the alias table (which imported name a local
name stands for, so `T.matmul` after `import torch as T` is torch.matmul)
and the module's structure (its Triton kernels, functions, classes, and
what ModelNew.forward reaches). Reads the AST only; never runs the code.

Standard library only, though the modules a name reaches are looked up
live (imported if allowed and not yet imported) to learn what they are.
"""

import ast
import importlib
import inspect
import sys
import types

from .static_policy import (ALLOWED_IMPORT_ROOTS, DENIED, INTROSPECTION, KERNEL_DECORATORS,
                            TORCH_ALLOWED, TORCH_ALLOWED_PREFIXES)

_FUNC_NODES = (ast.FunctionDef, ast.AsyncFunctionDef)


# ---------------------------------------------------------------------------
# Names: the alias table and dotted-chain resolution.
# ---------------------------------------------------------------------------

def _chain(node):
    """['a', 'b', 'c'] for the expression a.b.c; None if it is not a plain chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _resolve(node, aliases):
    """The fully qualified name of a chain whose root an import bound, else None.

    `T.matmul` after `import torch as T` resolves to "torch.matmul", so aliases
    cannot hide a denied name."""
    parts = _chain(node)
    if parts is None or parts[0] not in aliases:
        return None
    return ".".join([aliases[parts[0]]] + parts[1:])


def _build_aliases(tree):
    """Local name -> qualified name, from every import and module-level alias."""
    aliases = {}
    for node in ast.walk(tree):  # imports inside functions bind names too
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:  # `import torch.nn` binds `torch`
                    root = a.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for a in node.names:
                if a.name != "*":
                    aliases[a.asname or a.name] = f"{module}.{a.name}"
    # `mm = torch.matmul` at module level makes `mm` an alias as well. Only
    # module-level assignments: local names are too often reused for tensors.
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            qual = _resolve(stmt.value, aliases)
            if qual is not None:
                aliases[stmt.targets[0].id] = qual
    return aliases


def _denied(qual):
    """(flag, why) for a qualified name under DENIED (longest prefix) or
    private, as spelled or as what it really is (_real_name)."""
    rule = _denied_as_spelled(qual)
    if rule is None:
        real = _real_name(qual)
        if real != qual:
            rule = _denied_as_spelled(real)
            if rule is not None:
                rule = (rule[0], f"is {real}, which {rule[1]}")
            elif real.split(".")[0] not in ALLOWED_IMPORT_ROOTS:
                # A module the candidate may not import, held by one it may
                # (torch.nn.modules.module.weakref is weakref).
                rule = (INTROSPECTION, f"is {real}, a module off the import allowlist")
    return rule


# Attribute names the checker's own allowlist and rules cannot judge where
# the object is unknown: not a local name, not a module.
_COMMON_ATTRS = frozenset("data cuda format replace remove load save random seed read write "
                          "open path stat link walk".split())
# len(sys.modules) -> (for any object, for a local name): made again when
# modules were imported since (torch after the first check of a process
# that had not imported it yet).
_unresolved = {}


def unresolved_attrs(on_a_name=False):
    """{attribute name: rule} for an attribute of an object the checker
    cannot name: `[torch][0].x`, `(lambda m: m)(enum).x`, `m.x` in a
    function called with torch. A red team's third round went through such
    roots to every dotted rule (`.set_num_threads`, `.library`) and to
    modules held under other names (enum.bltns is builtins, random._os is
    os, collections._sys is sys). Two kinds, from the live modules:
      - the last step of each denied dotted name under an allowed root (the
        candidate holds torch anyway): set_num_threads, library, backends;
      - every name under which a loaded module holds a top-level module
        that is denied or off the import allowlist (bltns, _os, _sys,
        weakref, json), or a private module (_C, _ops).
    Names common on the candidate's own objects (.data, .cuda, .format) are
    left out. on_a_name: for a local name (a parameter, `self`), whose own
    private attributes (`self._state`) are the candidate's business: of
    the private names, only those an allowed root module holds itself
    (torch._C, random._os). Made from the checker process's modules (the
    candidate's libraries, imported), and again once more were imported."""
    loaded = len(sys.modules)
    if loaded not in _unresolved:
        _unresolved.clear()
        _unresolved[loaded] = _make_unresolved()
    on_values, on_names = _unresolved[loaded]
    return on_names if on_a_name else on_values


def _make_unresolved():
    """(names judged on any object, names judged on a local name)."""
    out = {}
    for name, rule in DENIED.items():
        parts = name.split(".")
        if len(parts) > 1 and parts[0] in ALLOWED_IMPORT_ROOTS and parts[-1] not in _COMMON_ATTRS:
            out.setdefault(parts[-1], (rule[0], f"can be {name}, which {rule[1]}"))
    for module in list(sys.modules.values()):
        try:
            entries = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in entries:
            if (attr in out or attr in _COMMON_ATTRS or attr.startswith("__")
                    or not isinstance(value, types.ModuleType)):
                continue
            held = getattr(value, "__name__", None)
            # A top-level module under any name (bltns, _os, weakref), or a
            # private one; a denied submodule (torch.distributed.rpc.api)
            # is reached through its parent's name, which a dotted rule
            # already holds, and its own last name is often generic.
            if not isinstance(held, str) or not held or ("." in held and not attr.startswith("_")):
                continue
            rule = _denied_as_spelled(held)
            if rule is None and held.split(".")[0] not in ALLOWED_IMPORT_ROOTS:
                rule = (INTROSPECTION, "is off the import allowlist")
            if rule is not None:
                out[attr] = (rule[0], f"can be module {held}, which {rule[1]}")
    # Of the private names, on a local name: those an allowed root holds
    # itself, for a module a rule names or a top-level one (torch._C,
    # random._os), not merely a private one (torch._tensor: `self._tensor`).
    held_by_roots = set()
    for root in ALLOWED_IMPORT_ROOTS:
        module = sys.modules.get(root)
        if module is None:
            continue
        for attr, value in vars(module).items():
            held = getattr(value, "__name__", "") if isinstance(value, types.ModuleType) else ""
            parts = held.split(".") if isinstance(held, str) and held else []
            if parts and (len(parts) == 1 or any(".".join(parts[:n]) in DENIED
                                                 for n in range(1, len(parts) + 1))):
                held_by_roots.add(attr)
    return out, {attr: rule for attr, rule in out.items()
                 if not attr.startswith("_") or attr in held_by_roots}


def _real_name(qual):
    """The name of what a dotted name really reaches where it passes through
    a module held as another module's attribute: torch, typing and warnings
    import sys, so `torch.sys.modules` is `sys.modules` and `typing.sys` is
    `sys`; denying names as spelled alone let every such path through. Each
    step is looked up in the live module (the verifier's zygote has the
    candidate's libraries imported; an allowed root not yet imported is
    imported here) with inspect.getattr_static, which runs no attribute's
    code; past a step it cannot follow, the rest is kept as spelled."""
    parts = qual.split(".")
    obj = sys.modules.get(parts[0])
    if obj is None:
        if parts[0] not in ALLOWED_IMPORT_ROOTS:
            return qual
        try:
            obj = importlib.import_module(parts[0])
        except Exception:  # noqa: BLE001 - absent or broken here: judge the spelling
            return qual
    name = [parts[0]]
    for i, attr in enumerate(parts[1:], 1):
        try:
            obj = inspect.getattr_static(obj, attr)
        except AttributeError:
            obj = sys.modules.get(".".join(name + [attr]))  # a submodule bound lazily
            if obj is None:
                return ".".join(name + parts[i:])
        module_name = obj.__name__ if isinstance(obj, types.ModuleType) else None
        if isinstance(module_name, str) and module_name:
            name = module_name.split(".")
        else:
            name.append(attr)
    return ".".join(name)


def _denied_as_spelled(qual):
    parts = qual.split(".")
    for n in range(len(parts), 0, -1):
        rule = DENIED.get(".".join(parts[:n]))
        if rule is not None:
            return rule
    for p in parts[1:]:
        if p.startswith("_") and not (p.startswith("__") and p.endswith("__")):
            return (INTROSPECTION, "is a private API below the public, guarded one")
    return None


def _torch_allowed(qual):
    last = qual.rsplit(".", 1)[-1]
    return (qual in TORCH_ALLOWED or qual.startswith(TORCH_ALLOWED_PREFIXES)
            or (last.startswith("__") and last.endswith("__")))  # torch.__version__


def _shown(node, qual):
    """How a finding names a construct: its source text, plus the resolved name."""
    text = ast.unparse(node)
    return text if qual is None or qual == text else f"{text} ({qual})"


def _walk_code(root, kernels):
    """ast.walk that does not enter kernel bodies (they hold tl.*, not torch)."""
    todo = [root]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not (isinstance(child, _FUNC_NODES) and child.name in kernels):
                todo.append(child)


# ---------------------------------------------------------------------------
# Module structure: kernels, functions, classes and what forward reaches.
# ---------------------------------------------------------------------------

class _Module:
    def __init__(self, tree, aliases):
        self.aliases = aliases
        self._methods, self._attr_classes, self._callees = {}, {}, {}  # memos
        self.kernels, self.functions, self.classes = {}, {}, {}
        # Module-level `name = expr`: reaching `name` reaches what expr names, as
        # in the Triton tutorials' `layer_norm = LayerNorm.apply`.
        self.values = {}
        for node in tree.body:
            if isinstance(node, _FUNC_NODES):
                target = self.kernels if self._is_kernel(node) else self.functions
                target[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node  # the last definition wins, as at run time
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                self.values.update((t.id, node.value) for t in targets if isinstance(t, ast.Name))

    def _is_kernel(self, fn):
        for d in fn.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            if _resolve(target, self.aliases) in KERNEL_DECORATORS:
                return True
        return False

    def _lineage(self, cls_name):
        """The class and its module-level bases, nearest first (a simple MRO)."""
        order, todo = [], [cls_name]
        while todo:
            name = todo.pop(0)
            if name in self.classes and name not in order:
                order.append(name)
                todo += [b.id for b in self.classes[name].bases if isinstance(b, ast.Name)]
        return order

    def methods(self, cls_name):
        if cls_name in self._methods:
            return self._methods[cls_name]
        found = self._methods[cls_name] = {}
        for name in reversed(self._lineage(cls_name)):  # nearer classes override
            for node in self.classes[name].body:
                if isinstance(node, _FUNC_NODES):
                    found[node.name] = node
        return found

    def attr_classes(self, cls_name):
        """self.X -> class name, for `self.X = Helper(...)` in the class's methods."""
        if cls_name in self._attr_classes:
            return self._attr_classes[cls_name]
        found = self._attr_classes[cls_name] = {}
        for fn in self.methods(cls_name).values():
            for node in ast.walk(fn):
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                        and isinstance(node.value.func, ast.Name)
                        and node.value.func.id in self.classes):
                    for t in node.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                            found[t.attr] = node.value.func.id
        return found

    def reachable(self, roots):
        """(function, owner class or None) pairs reachable from roots: through
        module-level functions named, module-level classes named (all their
        methods), module-level values named (the expression stands in for a
        function) and self.method / self.helper_instance on the owner class."""
        seen, order, todo = set(), [], list(roots)
        while todo:
            fn, owner = todo.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            order.append((fn, owner))
            key = (id(fn), owner)
            if key not in self._callees:
                self._callees[key] = self._find_callees(fn, owner)
            todo += self._callees[key]
        return order

    def _find_callees(self, fn, owner):
        self_name = fn.args.args[0].arg if owner and fn.args.args else None
        methods = self.methods(owner) if owner else {}
        helpers = self.attr_classes(owner) if owner else {}
        out = []
        for node in _walk_code(fn, self.kernels):
            if isinstance(node, ast.Name):
                if node.id in self.functions:
                    out.append((self.functions[node.id], None))
                if node.id in self.classes:
                    out += [(m, node.id) for m in self.methods(node.id).values()]
                if node.id in self.values:
                    out.append((self.values[node.id], None))
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id == self_name):
                if node.attr in methods:
                    out.append((methods[node.attr], owner))
                if node.attr in helpers:
                    cls = helpers[node.attr]
                    out += [(m, cls) for m in self.methods(cls).values()]
        return out

    def launches(self, reached):
        """Kernel names subscripted (kernel[grid]) in the reached functions."""
        names = []
        for fn, _ in reached:
            for node in _walk_code(fn, self.kernels):
                if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                        and node.value.id in self.kernels and node.value.id not in names):
                    names.append(node.value.id)
        return names
