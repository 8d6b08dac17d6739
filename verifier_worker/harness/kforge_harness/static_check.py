"""Stage 1 of the verifier funnel: a static (AST) check of candidate source.

The candidate is KernelBench-style Python: a module-level `class ModelNew` whose
`forward` must do its work in the candidate's own `@triton.jit` kernels. This
module reads the source with `ast` and never executes it. It finds:
  - plain failures (flag ""): oversize source, syntax errors, no ModelNew, no
    kernel, or no kernel launch reachable from ModelNew.forward;
  - hack patterns, each tagged with a `kforge.v1.HackFlag` enum name: PyTorch
    doing the kernel's work, try/except fallbacks, reuse of the reference
    `Model`, introspection, threads and streams, subprocesses, network, files,
    monkeypatching, tensor subclasses and forged results.
Static checks are a filter; the later runtime stages decide. Every finding is
blocking, so `ok` is True only when there are none.

Usage:
    from kforge_harness import static_check
    result = static_check.check_source(source, require_triton=True)
    if not result["ok"]:
        for f in result["findings"]:
            print(f["line"], f["flag"], f["message"])

    python3 -m kforge_harness.static_check candidate.py [--no-require-triton]
prints the result as JSON and exits 0 when ok, 1 otherwise.

Standard library only, Python 3.11 and 3.12: the trusted zygote runs it on every
candidate. The policy lives in static_policy.py; the walkers here only apply it.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import string
import sys

from .static_module import (
    _FUNC_NODES, _Module, _build_aliases, _chain, _denied, _resolve, _shown, _torch_allowed,
    unresolved_attrs,
    _walk_code,
)
from .static_policy import (
    ALLOWED_IMPORT_ROOTS,
    BY_NAME_ONLY,
    DENIED_ATTRS,
    DENIED_NAMES,
    FALLBACK_ANYWHERE,
    INTROSPECTION,
    MONKEYPATCH,
    RAW_MEMORY_PROTOCOLS,
    REFERENCE,
    REFERENCE_MODULES,
    RESULT_FORGERY,
    TENSOR_COMPUTE_METHODS,
    TORCH_FALLBACK,
    TRY_EXCEPT,
    VERDICT_WORDS,
    _SUBCLASS,
)

DEFAULT_MAX_BYTES = 262144

_TRY_NODES = (ast.Try,) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


# ---------------------------------------------------------------------------
# Findings.
# ---------------------------------------------------------------------------

class _Findings:
    def __init__(self):
        self._items = {}  # (line, flag, message) -> None: ordered and de-duplicated

    def add(self, line, flag, text):
        if flag:  # name the hack in words too: "(torch fallback)"
            text += f" ({flag[len('HACK_'):].lower().replace('_', ' ')})"
        message = f"line {line}: {text}" if line else text
        self._items[(line, flag, message)] = None

    def deny(self, node, what, rule):
        flag, why = rule
        self.add(getattr(node, "lineno", 0), flag, f"{what}: {why}")

    def as_list(self):
        return [{"line": line, "flag": flag, "message": message}
                for line, flag, message in sorted(self._items)]


# ---------------------------------------------------------------------------
# Rules 2-3: structure.
# ---------------------------------------------------------------------------

def _check_structure(mod, require_triton, out):
    """Returns the launched kernel names (empty when there is no ModelNew)."""
    cls = mod.classes.get("ModelNew")
    if cls is None:
        out.add(0, "", "no class ModelNew: the harness builds ModelNew at module level")
        return []
    methods = mod.methods("ModelNew")
    roots = [(methods[m], "ModelNew") for m in ("forward", "__call__") if m in methods]
    if "forward" not in methods:
        out.add(cls.lineno, "", "ModelNew has no forward method")
    launched = mod.launches(mod.reachable(roots))
    if require_triton and not mod.kernels:
        out.add(0, "", "defines no @triton.jit kernel: the work must be done in Triton")
    elif require_triton and not launched:
        out.add(cls.lineno, "", "forward launches no @triton.jit kernel "
                "(no kernel[grid](...) reachable from ModelNew.forward)")
    return launched


# ---------------------------------------------------------------------------
# Rule 4: PyTorch doing the kernel's work.
# ---------------------------------------------------------------------------

def _check_fallback(tree, mod, out):
    methods = mod.methods("ModelNew") if "ModelNew" in mod.classes else {}
    scope = mod.reachable([(fn, "ModelNew") for fn in methods.values()])
    for fn, owner in scope:
        owner_methods = mod.methods(owner) if owner else {}
        inner = set()  # ids of nodes inside a chain already judged as a whole
        for node in _walk_code(fn, mod.kernels):
            if id(node) not in inner:
                where = getattr(fn, "name", None) or f"the value set on line {fn.lineno}"
                _fallback_node(node, where, owner_methods, mod.aliases, out)
            if isinstance(node, ast.Attribute):
                inner.add(id(node.value))
    # torch.compile and friends count wherever they appear.
    for node in ast.walk(tree):
        qual = _resolve(node, mod.aliases)  # None unless node is an import-rooted chain
        if qual in FALLBACK_ANYWHERE:
            out.add(node.lineno, TORCH_FALLBACK,
                    f"{_shown(node, qual)} hands the model to a PyTorch compiler")


def _fallback_node(node, where, owner_methods, aliases, out):
    why = f"in {where} does the kernel's work in PyTorch"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        out.add(node.lineno, TORCH_FALLBACK, f"the @ operator {why}")
    # Stores are judged as monkeypatching by the general pass.
    if not isinstance(node, (ast.Attribute, ast.Name)) or not isinstance(node.ctx, ast.Load):
        return
    qual = _resolve(node, aliases)
    if qual is not None:
        # Denied names are reported by the general pass under their own flag.
        if (qual.split(".")[0] == "torch" and not _torch_allowed(qual)
                and _denied(qual) is None and qual not in FALLBACK_ANYWHERE):
            out.add(node.lineno, TORCH_FALLBACK, f"{_shown(node, qual)} {why}")
    elif isinstance(node, ast.Attribute) and node.attr in TENSOR_COMPUTE_METHODS:
        # self.relu(x) may be the candidate's own method wrapping a kernel.
        is_own = isinstance(node.value, ast.Name) and node.attr in owner_methods
        if not is_own:
            out.add(node.lineno, TORCH_FALLBACK, f".{node.attr}() {why}")


# ---------------------------------------------------------------------------
# Rules 5-15: constructs denied anywhere in the module.
# ---------------------------------------------------------------------------

# str.format and format_map follow a replacement field's `.name` and
# `[key]` with C lookups no guard sees: "{0.sys.modules[os].environ}".
# format(torch) read a red team every module and the process's environment,
# the names held in a string. A format is a literal's, called in place,
# whose fields are plain (positions, names, specs).
_FORMAT_METHODS = ("format", "format_map")
_PLAIN_FIELD = frozenset("0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _plain_format(text, depth=0):
    """Whether every replacement field of `text` (nested ones in format
    specs too) names a position or a keyword and nothing inside it."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return False
    for _, field, spec, _ in fields:
        if field is None:
            continue
        if not set(field) <= _PLAIN_FIELD:
            return False
        if spec and (depth > 1 or not _plain_format(spec, depth + 1)):
            return False
    return True


def _checked_formats(tree):
    """The .format attributes called in place on a literal with plain fields."""
    return {id(n.func) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "format" and isinstance(n.func.value, ast.Constant)
            and isinstance(n.func.value.value, str) and _plain_format(n.func.value.value)}


def _check_everywhere(tree, aliases, out):
    inner = set()  # ids of nodes inside an attribute nest judged from its top
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    own_classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    plain_formats = _checked_formats(tree)
    for node in ast.walk(tree):  # breadth first: a nest's top comes first
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
            if node.attr == "modules" and id(node) not in called:
                # nn.Module.modules() is a method; sys.modules, reached
                # from a root the alias table cannot follow (a red team's
                # torch._import_dotted_name("sys")), is every module.
                out.add(node.lineno, INTROSPECTION,
                        f".modules of {ast.unparse(node.value)[:40]} used as a value: "
                        "every loaded module, the harness's among them")
            if node.attr in _FORMAT_METHODS and id(node) not in plain_formats:
                out.add(node.lineno, INTROSPECTION,
                        f".{node.attr} of {ast.unparse(node.value)[:40]}: a format string's "
                        "fields read attributes and items by names held in text; only a "
                        "literal with plain fields ({}, {0}, {name}, {:.3f}) is formatted")
        if (isinstance(node, ast.Name) and node.id in BY_NAME_ONLY and node.id not in aliases
                and id(node) not in called):
            out.deny(node, f"{node.id} used as a value", BY_NAME_ONLY[node.id])
        _check_annotations(node, out)
        if isinstance(node, _TRY_NODES) and not _is_import_guard(node, aliases):
            kind = "try/except" if node.handlers else "try/finally"
            out.add(node.lineno, TRY_EXCEPT,
                    f"{kind} can hide a failing kernel behind a fallback path")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            _check_import(node, out)
        elif isinstance(node, ast.MatchClass):
            # case object(__self__=b) reads len.__self__ by a name held as a
            # bare string (a red team's builtins); positional patterns read
            # the names a class's __match_args__ lists, on any subject its
            # metaclass's __instancecheck__ accepts.
            out.add(node.lineno, INTROSPECTION, "a class pattern reads attributes by names "
                    "out of the checker's view")
        elif isinstance(node, ast.ClassDef):
            _check_class(node, aliases, out)
        elif isinstance(node, ast.Constant) and node.value == "__module__":
            # The same claim made in a class's namespace by string:
            # type("H", (), {"__module__": "kforge_harness.timing"}).
            out.deny(node, "'__module__'", DENIED_NAMES["__module__"])
        elif isinstance(node, _FUNC_NODES) and node.name in ("__torch_function__",
                                                               "__torch_dispatch__"):
            out.deny(node, f"def {node.name}", _SUBCLASS)
        elif isinstance(node, _FUNC_NODES) and node.name in ("__exit__", "__aexit__"):
            out.add(node.lineno, TRY_EXCEPT, f"def {node.name}: a context manager's exit can "
                    "swallow a failing kernel's exception, as try/except does")
        elif isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in inner:
            _check_name(node, aliases, out)
        elif isinstance(node, ast.Call):
            _check_call(node, aliases, out)
        _check_raw_memory_names(node, out)
        _check_super(node, aliases, own_classes, out)
        _check_targets(node, aliases, out)


def _inert(expr, aliases):
    """A constant, a name, a dotted name, or a tuple/list of them: binding it
    runs nothing. A name reaching into torch or NumPy is not: bound in a
    guard, out of the alias table's sight, `mm = torch.matmul` would let
    forward call a library op under another name."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, (ast.Name, ast.Attribute)):
        if _chain(expr) is None:
            return False
        qual = _resolve(expr, aliases) or ""
        return qual.split(".")[0] != "torch"
    if isinstance(expr, (ast.Tuple, ast.List)):
        return all(_inert(e, aliases) for e in expr.elts)
    return False


def _is_import_guard(node, aliases):
    """A try/except that wraps no computation: its body imports, and every
    block only imports, binds inert values, passes or (in a handler)
    raises, as in `try: import x` / `except ImportError: x = None`. Such a
    guard cannot stand between a failing kernel and a fallback."""
    if not node.handlers or not any(isinstance(st, (ast.Import, ast.ImportFrom))
                                    for st in node.body):
        return False

    def simple(statements, in_handler=False):
        for st in statements:
            if isinstance(st, (ast.Import, ast.ImportFrom, ast.Pass)):
                continue
            if isinstance(st, ast.Raise) and in_handler:
                continue
            if (isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None
                    and _inert(st.value, aliases)):
                continue
            return False
        return True

    return (simple(node.body) and simple(node.orelse) and simple(node.finalbody)
            and all(simple(h.body, in_handler=True) for h in node.handlers))


def _check_import(node, out):
    if isinstance(node, ast.ImportFrom) and node.level:
        out.add(node.lineno, REFERENCE, "relative import reaches the files next to the "
                "candidate (the reference, the harness)")
        return
    if isinstance(node, ast.Import):
        imported = [(a.name, f"import {a.name}", a) for a in node.names]
    else:
        imported = [(f"{node.module}.{a.name}", f"from {node.module} import {a.name}", a)
                    for a in node.names]
    for qual, what, alias in imported:
        root = qual.split(".")[0]
        rule = _denied(qual)
        if alias.name == "*":
            out.add(node.lineno, "", f"{what} hides which names the candidate uses")
        if rule is not None:
            out.deny(node, what, rule)
        elif root in REFERENCE_MODULES:
            out.add(node.lineno, REFERENCE, f"{what} reaches for the task's reference")
        elif root not in ALLOWED_IMPORT_ROOTS:
            out.add(node.lineno, "", f"{what}: {root} is not on the import allowlist")
        if "Model" in (alias.name, alias.asname):
            out.add(node.lineno, REFERENCE, f"{what} binds Model, the task's reference model")


def _check_raw_memory_names(node, out):
    """A raw-memory protocol's name bound or spelled anywhere: a def, a
    name assigned (in a class body), a keyword, a string (a dict key)."""
    name = None
    if isinstance(node, _FUNC_NODES):
        name = node.name
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        name = node.id
    elif isinstance(node, ast.keyword):
        name = node.arg
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        name = node.value
    if name in RAW_MEMORY_PROTOCOLS:
        shown = (repr(name) if isinstance(node, ast.Constant)
                 else f"def {name}" if isinstance(node, _FUNC_NODES) else name)
        out.deny(node, shown, RAW_MEMORY_PROTOCOLS[name])


def _check_super(node, aliases, own_classes, out):
    """super(C, obj) names the class whose bases are searched: one of the
    candidate's own (super(ModelNew, self), as KernelBench writes it), not a
    library's, whose base's method would be reached past a guard on it
    (super(torch.UntypedStorage, s).resize_: a red team's storage shrunk
    under its tensor, read past its block)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "super" and "super" not in aliases and node.args):
        return
    first = node.args[0]
    if not (isinstance(first, ast.Name) and first.id in own_classes):
        out.add(node.lineno, INTROSPECTION, f"super({ast.unparse(first)[:40]}, ...) reaches "
                "the methods of a class not the candidate's, past what overrides them")


def _literal(expr):
    """A constant, or a tuple, list or set of them: no callable."""
    if isinstance(expr, ast.Constant):
        return True
    return isinstance(expr, (ast.Tuple, ast.List, ast.Set)) and all(map(_literal, expr.elts))


def _check_class(node, aliases, out):
    if node.name == "Model":
        out.add(node.lineno, REFERENCE, "class Model redefines the task's reference model")
    # A special method (or forward) bound to a callable that is not a def
    # of the class's runs with no frame of the candidate's, in whatever
    # frame triggers it: a red team's __del__ = functools.partial(
    # functools.update_wrapper, ...) read a harness closure from the
    # harness's frames, and its __setattr__ = dict.__setitem__ made
    # attribute writes land as items. Data (__slots__, __hash__ = None) is
    # a literal.
    defined = {st.name for st in node.body if isinstance(st, _FUNC_NODES)}
    for st in node.body:
        if isinstance(st, _FUNC_NODES):
            defined.add(st.name)
        targets = (st.targets if isinstance(st, ast.Assign)
                   else [st.target] if isinstance(st, (ast.AnnAssign, ast.AugAssign)) else [])
        value = getattr(st, "value", None)
        for target in targets:
            if (isinstance(target, ast.Name) and value is not None and not _literal(value)
                    and not (isinstance(value, ast.Name) and value.id in defined)
                    and (target.id == "forward" or (target.id.startswith("__")
                                                    and target.id.endswith("__")))):
                out.deny(st, f"class {node.name} binds {target.id} to something other than a "
                         "function it defines", (INTROSPECTION, "a special method bound to a "
                         "library's callable runs without a frame of the candidate's, out of "
                         "the run-time checks' sight"))
    for base in node.bases:
        qual = _resolve(base, aliases)
        is_tensor = (qual in ("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter")
                     or (qual is None and isinstance(base, ast.Name) and base.id == "Tensor"))
        if is_tensor:
            out.deny(node, f"class {node.name} subclasses {_shown(base, qual)}", _SUBCLASS)


def _check_name(node, aliases, out):
    """Judges a whole attribute nest (a.b.c, f().a.b) or a bare name."""
    top, attrs = node, []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    for attr in attrs:
        if attr in DENIED_ATTRS:
            out.deny(top, f"attribute .{attr}", DENIED_ATTRS[attr])
    qual = _resolve(top, aliases) if isinstance(node, ast.Name) else None
    if qual is None:
        # Rooted at an object the alias table cannot name: judged by the
        # names alone (static_module.unresolved_attrs).
        unresolved = unresolved_attrs(on_a_name=isinstance(node, ast.Name))
        for attr in attrs:
            if attr in unresolved and attr not in DENIED_ATTRS:
                out.deny(top, f"attribute .{attr} of {ast.unparse(node)[:40]}", unresolved[attr])
    if not isinstance(node, ast.Name):
        return
    if qual is not None:
        rule = _denied(qual)
        if rule is not None:
            out.deny(top, _shown(top, qual), rule)
    elif node.id in DENIED_NAMES:
        out.deny(top, f"{node.id}", DENIED_NAMES[node.id])


def _annotations(node):
    if isinstance(node, _FUNC_NODES):
        a = node.args
        every = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
        return [x.annotation for x in every if x.annotation] + ([node.returns] if node.returns
                                                                else [])
    if isinstance(node, ast.AnnAssign):
        return [node.annotation]
    return []


def _check_annotations(node, out):
    """A string in an annotation is code that typing.get_type_hints,
    functools.singledispatch or dataclasses may evaluate, unseen by the
    walkers (which read it as a constant); only a plain dotted name (a
    forward reference such as "ModelNew") may be one."""
    for annotation in _annotations(node):
        for c in ast.walk(annotation):
            if (isinstance(c, ast.Constant) and isinstance(c.value, str)
                    and not all(p.isidentifier() for p in c.value.split("."))):
                out.add(c.lineno, INTROSPECTION, f"annotation string {c.value[:40]!r} is code "
                        "that whatever reads the hints evaluates")


def _check_call(node, aliases, out):
    func = node.func
    name = func.id if isinstance(func, ast.Name) and func.id not in aliases else None
    if name in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
        _check_dynamic_attr(node, name, aliases, out)
    parts = _chain(func) or []
    if name == "print" or parts[-2:] in (["stdout", "write"], ["stderr", "write"]):
        for arg in list(node.args) + [k.value for k in node.keywords]:
            for c in ast.walk(arg):
                if (isinstance(c, ast.Constant) and isinstance(c.value, str)
                        and any(w in c.value.lower() for w in VERDICT_WORDS)):
                    out.add(node.lineno, RESULT_FORGERY, f"printing {c.value[:40]!r} "
                            "imitates the harness's verdict")


def _check_dynamic_attr(node, name, aliases, out):
    target, attr = node.args[0], node.args[1]
    root = _root_name(target)
    if name in ("setattr", "delattr") and root in aliases:
        out.add(node.lineno, MONKEYPATCH, f"{name}() on {ast.unparse(target)} patches "
                f"{aliases[root]}, an imported module")
    if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
        out.add(node.lineno, INTROSPECTION,
                f"{name}() with a computed attribute name hides what it reaches")
        return
    if attr.value in DENIED_ATTRS:
        out.deny(node, f"{name}(..., {attr.value!r})", DENIED_ATTRS[attr.value])
    if attr.value in _FORMAT_METHODS:
        out.add(node.lineno, INTROSPECTION, f"{name}(..., {attr.value!r}): a format method "
                "away from the literal it formats")
    qual = _resolve(target, aliases)
    if qual is None:
        unresolved = unresolved_attrs(on_a_name=isinstance(target, ast.Name))
        if attr.value in unresolved:
            out.deny(node, f"{name}(..., {attr.value!r})", unresolved[attr.value])
    rule = _denied(f"{qual}.{attr.value}") if qual else None
    if rule is not None:
        out.deny(node, f"{name}({qual}, {attr.value!r})", rule)


def _root_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node):
    """Expressions a statement assigns or deletes, tuples flattened."""
    if isinstance(node, (ast.Assign, ast.Delete)):
        todo = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor,
                           ast.comprehension)):
        todo = [node.target]
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        todo = [node.optional_vars]
    else:
        return []
    found = []
    while todo:
        t = todo.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            todo += t.elts
        elif isinstance(t, ast.Starred):
            todo.append(t.value)
        else:
            found.append(t)
    return found


def _check_targets(node, aliases, out):
    verb = "deleting" if isinstance(node, ast.Delete) else "assigning"
    for t in _targets(node):
        root = _root_name(t)
        if isinstance(t, (ast.Attribute, ast.Subscript)) and root in aliases:
            out.add(t.lineno, MONKEYPATCH, f"{verb} {ast.unparse(t)} patches "
                    f"{aliases[root]}, an imported module")


# ---------------------------------------------------------------------------
# Entry points.
# ---------------------------------------------------------------------------

def _result(out, kernels=(), launched=(), digest=""):
    findings = out.as_list()
    return {"ok": not findings, "findings": findings, "kernels": list(kernels),
            "launched_kernels": list(launched), "normalized_sha256": digest}


def check_source(source: str, require_triton: bool = True,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> dict:
    """Checks candidate source without running it; returns a JSON-able dict:
    ok, findings [{line, flag, message}] sorted by line, kernels,
    launched_kernels and normalized_sha256 (of ast.dump, so comments and
    formatting do not change it; "" when the source does not parse).
    require_triton=False (CPU-only runs) accepts a plain-PyTorch ModelNew."""
    out = _Findings()
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        out.add(0, "", f"source is {size} bytes, over the {max_bytes}-byte limit")
        return _result(out)
    try:
        tree = ast.parse(source)
    except SyntaxError as e:  # also null bytes on 3.12
        out.add(e.lineno or 0, "", f"syntax error: {e.msg}")
        return _result(out)
    except (ValueError, RecursionError, MemoryError) as e:  # null bytes on 3.11, deep nesting
        out.add(0, "", f"source does not parse: {e}")
        return _result(out)
    try:
        return _analyse(tree, require_triton, out)
    except RecursionError:  # ast.dump and unparse recurse; a hostile nest can be deep
        out = _Findings()
        out.add(0, "", "source is nested too deeply to analyse")
        return _result(out)


def _analyse(tree, require_triton, out):
    digest = hashlib.sha256(ast.dump(tree).encode("utf-8", "backslashreplace")).hexdigest()
    aliases = _build_aliases(tree)
    mod = _Module(tree, aliases)
    launched = _check_structure(mod, require_triton, out)
    if require_triton:
        _check_fallback(tree, mod, out)
    _check_everywhere(tree, aliases, out)
    return _result(out, mod.kernels, launched, digest)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m kforge_harness.static_check",
        description="Stage-1 static check of a kforge candidate; prints JSON, "
                    "exits 0 when ok and 1 when not.")
    parser.add_argument("file", help="candidate Python source")
    parser.add_argument("--no-require-triton", action="store_true",
                        help="accept a plain-PyTorch ModelNew (CPU-only runs)")
    parser.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES)
    args = parser.parse_args(argv)
    with open(args.file, "rb") as f:
        raw = f.read()
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        out = _Findings()
        out.add(0, "", f"source is not UTF-8: {e}")
        result = _result(out)
    else:
        result = check_source(source, not args.no_require_triton, args.max_bytes)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
