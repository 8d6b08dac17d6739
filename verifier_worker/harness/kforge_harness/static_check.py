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
candidate. The policy lives in the tables below; the walkers only apply it.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys

DEFAULT_MAX_BYTES = 262144

# kforge.v1.HackFlag enum names (proto/kforge/v1/verdict.proto).
TORCH_FALLBACK = "HACK_TORCH_FALLBACK"
TRY_EXCEPT = "HACK_TRY_EXCEPT_FALLBACK"
REFERENCE = "HACK_REFERENCE_REUSE"
INTROSPECTION = "HACK_INTROSPECTION"
CONCURRENCY = "HACK_CONCURRENCY"
SUBPROCESS = "HACK_SUBPROCESS"
NETWORK = "HACK_NETWORK"
FILE_ACCESS = "HACK_FILE_ACCESS"
MONKEYPATCH = "HACK_MONKEYPATCH"
TENSOR_SUBCLASS = "HACK_TENSOR_SUBCLASS"
RESULT_FORGERY = "HACK_RESULT_FORGERY"

# ---------------------------------------------------------------------------
# Policy tables. Edit these, not the walkers below. Name lists are written as
# space-separated strings to keep them dense; _rules() expands them.
# ---------------------------------------------------------------------------

def _rules(names, rule, prefix=""):
    return {prefix + n: rule for n in names.split()}


# Top-level modules a candidate may import. Anything else is a plain failure,
# so an unknown module cannot smuggle in what DENIED would catch by name.
ALLOWED_IMPORT_ROOTS = frozenset("""
    torch triton math numpy typing typing_extensions functools itertools dataclasses
    collections types operator enum abc numbers contextlib __future__ random copy string re
    warnings""".split())

# (flag, why): a finding reads "line N: <construct>: <why> (<flag in words>)".
_INTRO = (INTROSPECTION, "reaches into the interpreter, the harness or their state")
_THREADS = (CONCURRENCY, "runs work concurrently, outside what the harness times")
_STREAMS = (CONCURRENCY, "moves GPU work off the stream the harness times")
_SYNC = (CONCURRENCY, "synchronises, times or captures GPU work, which is the harness's job")
_SHELL = (SUBPROCESS, "reaches the shell, other processes and the OS")
_SPAWN = (SUBPROCESS, "runs or signals another program")
_NET = (NETWORK, "reaches the network")
_FILES = (FILE_ACCESS, "reads or writes files")
_GLOBAL_STATE = (MONKEYPATCH, "changes global torch state that the reference and harness share")
_SUBCLASS = (TENSOR_SUBCLASS, "tensor subclasses and modes can defer or fake the work")
_EXIT = (RESULT_FORGERY, "exits early, before the harness records a verdict")
_TIME = (INTROSPECTION, "time functions are the harness's")
_MODEL = (REFERENCE, "refers to the task's reference model")

# Dotted names (modules or attributes) denied wherever they are imported or used.
# The longest matching prefix wins, so "os._exit" beats "os".
DENIED = {
    **_rules("sys gc inspect ctypes cffi importlib builtins marshal pickle dill cloudpickle "
             "code codeop traceback dis cupy pycuda cuda numba __main__ kforge_harness kforge",
             _INTRO),
    "sys.modules": (INTROSPECTION, "holds every loaded module, the harness's included"),
    "sys._getframe": (INTROSPECTION, "walks up the caller's frames into the harness"),
    "torch._C": (INTROSPECTION, "is torch's C core, below every guard"),
    "torch._dynamo": (INTROSPECTION, "is torch's compiler internals"),
    "torch.utils.cpp_extension": (INTROSPECTION, "compiles native code outside Triton"),
    "torch.backends": (INTROSPECTION, "flips backend flags (TF32, cuDNN) the baseline shares"),
    "triton.testing": (INTROSPECTION, "is benchmarking code, and timing is the harness's"),
    **_rules("torch.profiler torch.autograd.profiler torch.autograd.profiler_util",
             (INTROSPECTION, "is the harness's record of what forward runs")),
    **_rules("time timeit", _TIME),
    **_rules("threading _thread multiprocessing concurrent asyncio sched torch.multiprocessing "
             "torch.futures torch.jit.fork torch.jit.wait", _THREADS),
    **_rules("Stream cuda.Stream cuda.stream cuda.streams cuda.ExternalStream cuda.set_stream",
             _STREAMS, "torch."),
    **_rules("Event cuda.Event cuda.synchronize cuda.graph cuda.graphs cuda.CUDAGraph "
             "cuda.make_graphed_callables", _SYNC, "torch."),
    **_rules("os subprocess pty shutil signal posix resource", _SHELL),
    **_rules("system popen fork forkpty kill killpg posix_spawn posix_spawnp execl execle "
             "execlp execlpe execv execve execvp execvpe spawnl spawnle spawnlp spawnlpe spawnv "
             "spawnve spawnvp spawnvpe", _SPAWN, "os."),
    **_rules("open fdopen read write remove unlink rename replace listdir scandir walk mkdir "
             "makedirs rmdir removedirs path stat chdir getcwd chmod symlink link truncate",
             _FILES, "os."),
    **_rules("os._exit os.abort sys.exit atexit", _EXIT),
    **_rules("socket ssl http urllib urllib3 requests httpx aiohttp ftplib smtplib poplib "
             "imaplib telnetlib nntplib xmlrpc socketserver websocket websockets webbrowser "
             "torch.hub asyncio.open_connection asyncio.start_server "
             "asyncio.open_unix_connection asyncio.start_unix_server", _NET),
    **_rules("io pathlib tempfile glob fileinput shelve sqlite3 mmap zipfile tarfile gzip bz2 "
             "lzma torch.save torch.load torch.from_file numpy.save numpy.savez "
             "numpy.savez_compressed numpy.load numpy.fromfile numpy.loadtxt numpy.savetxt "
             "numpy.genfromtxt numpy.memmap", _FILES),
    **_rules("set_float32_matmul_precision set_default_dtype set_default_device "
             "set_default_tensor_type manual_seed seed random set_rng_state "
             "use_deterministic_algorithms set_num_threads set_flush_denormal cuda.manual_seed "
             "cuda.manual_seed_all cuda.set_rng_state cuda.set_device", _GLOBAL_STATE, "torch."),
    "numpy.random.seed": _GLOBAL_STATE,
    "torch.library": (MONKEYPATCH, "overrides torch operators, the reference's included"),
    **_rules("torch.overrides torch.utils._python_dispatch torch.Tensor._make_subclass "
             "torch.Tensor.as_subclass", _SUBCLASS),
    "contextlib.suppress": (TRY_EXCEPT, "swallows exceptions like a try/except fallback"),
}

# Attribute names denied on any object (its type is unknown statically).
DENIED_ATTRS = {
    **_rules("__dict__ __class__ __subclasses__ __globals__ __code__ __builtins__ __bases__ "
             "__mro__ __closure__ __loader__ __spec__ __getattribute__ _getframe f_back "
             "f_globals f_locals f_builtins gi_frame tb_frame", _INTRO),
    **_rules("_make_subclass as_subclass __torch_function__ __torch_dispatch__ "
             "TorchDispatchMode TorchFunctionMode", _SUBCLASS),
    **_rules("wait_stream record_stream wait_event", _STREAMS),
    "tofile": _FILES,
    "Model": _MODEL,
}

# Bare names denied unless an import rebinds them (then the import decides).
DENIED_NAMES = {
    **_rules("__import__ eval exec compile globals locals vars breakpoint __builtins__",
             (INTROSPECTION, "runs code or looks names up at run time, out of the checker's view")),
    "open": _FILES,
    **_rules("exit quit SystemExit", _EXIT),
    **_rules("TorchDispatchMode TorchFunctionMode", _SUBCLASS),
    "Model": _MODEL,
}

# Modules whose import is taken as reaching for the reference or its files.
REFERENCE_MODULES = frozenset(
    "reference ref model task problem kernelbench KernelBench candidate solution solutions".split())

# Rule 4, list 1: the torch.* names ModelNew may use. They allocate, describe or
# initialise; any other torch.* name in ModelNew computes and is a fallback.
TORCH_ALLOWED = frozenset(_rules("""
    empty empty_like zeros zeros_like ones ones_like full full_like arange tensor as_tensor
    empty_strided randn rand randint randn_like rand_like device Size dtype Tensor Generator
    no_grad inference_mode enable_grad is_tensor is_floating_point is_complex is_grad_enabled
    numel finfo iinfo get_default_dtype promote_types result_type broadcast_shapes
    cuda cuda.is_available cuda.current_device cuda.device_count cuda.get_device_properties
    cuda.get_device_capability cuda.get_device_name cuda.device cuda.current_stream
    nn nn.Module nn.Parameter nn.parameter.Parameter nn.ParameterList nn.ParameterDict
    nn.ModuleList nn.ModuleDict nn.Identity autograd autograd.Function
    float float16 float32 float64 half double bfloat16 int int8 int16 int32 int64 long short
    uint8 uint16 uint32 uint64 bool complex64 complex128 cfloat cdouble float8_e4m3fn
    float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz""", None, "torch.")) | {"torch"}
TORCH_ALLOWED_PREFIXES = ("torch.nn.init.",)

# NumPy names ModelNew may use (types and constants); any other NumPy call
# in ModelNew computes on the host, out of the GPU profiler's sight.
NUMPY_ALLOWED = frozenset(_rules("""
    float16 float32 float64 int8 int16 int32 int64 uint8 bool_ dtype pi e inf nan""",
                                 None, "numpy.")) | {"numpy"}

# Used anywhere in the module, these hand the model to PyTorch's compilers.
FALLBACK_ANYWHERE = frozenset({"torch.compile", "torch.jit.script", "torch.jit.trace"})

# Rule 4, list 2: tensor methods that compute (a fallback when ModelNew calls
# them). Names shared with methods of Python builtins (list.sort, set.add) are
# left out. TENSOR_ALLOWED_METHODS documents what stays allowed.
TENSOR_COMPUTE_METHODS = frozenset("""
    matmul mm bmm addmm addmv addbmm baddbmm mv dot vdot outer ger einsum tensordot kron sum
    nansum mean nanmean std var prod cumsum cumprod cummax cummin logcumsumexp max min amax
    amin aminmax argmax argmin norm logsumexp softmax log_softmax exp exp_ exp2 expm1 log log_
    log2 log10 log1p sqrt sqrt_ rsqrt pow pow_ abs abs_ neg neg_ sigmoid sigmoid_ tanh tanh_
    relu relu_ gelu silu mish elu leaky_relu hardtanh softplus clamp clamp_ clip clip_ add_
    sub_ mul mul_ div div_ true_divide addcmul addcmul_ addcdiv addcdiv_ lerp lerp_ where
    masked_fill masked_fill_ topk median mode kthvalue copy_ clone flip roll cross diag tril
    triu trace sin cos tan floor ceil sign reciprocal reciprocal_ maximum minimum fmod
    remainder square erf erfc conv1d conv2d conv3d linear layer_norm batch_norm group_norm
    instance_norm dropout index_select gather scatter scatter_ scatter_add scatter_add_
    index_add index_add_ index_put index_put_ repeat repeat_interleave apply_ map_
    """.split())
TENSOR_ALLOWED_METHODS = frozenset("""
    contiguous view view_as reshape reshape_as flatten unflatten unsqueeze squeeze permute
    transpose t expand expand_as size shape stride numel dim ndim element_size data_ptr
    is_contiguous to float half bfloat16 new_empty new_zeros new_ones new_full fill_ item
    tolist cpu cuda split chunk narrow select unbind dtype device""".split())
assert not TENSOR_COMPUTE_METHODS & TENSOR_ALLOWED_METHODS

# Decorators that make a module-level function a Triton kernel.
KERNEL_DECORATORS = frozenset(_rules("jit autotune heuristics runtime.jit runtime.autotune "
                                     "runtime.heuristics", None, "triton."))

# print text that looks like a verdict (matched case-insensitively, as substrings).
VERDICT_WORDS = ("pass", "correct", "speedup", "verdict")

_TRY_NODES = (ast.Try,) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
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
    """(flag, why) for a qualified name under DENIED (longest prefix) or private."""
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
    if qual is not None and qual.split(".")[0] == "numpy" and qual not in NUMPY_ALLOWED:
        out.add(node.lineno, TORCH_FALLBACK, f"{_shown(node, qual)} in {where} computes on "
                "the host with NumPy instead of in a kernel")
    elif qual is not None:
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

def _check_everywhere(tree, aliases, out):
    inner = set()  # ids of nodes inside an attribute nest judged from its top
    for node in ast.walk(tree):  # breadth first: a nest's top comes first
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
        if isinstance(node, _TRY_NODES) and not _is_import_guard(node, aliases):
            kind = "try/except" if node.handlers else "try/finally"
            out.add(node.lineno, TRY_EXCEPT,
                    f"{kind} can hide a failing kernel behind a fallback path")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            _check_import(node, out)
        elif isinstance(node, ast.ClassDef):
            _check_class(node, aliases, out)
        elif isinstance(node, _FUNC_NODES) and node.name in ("__torch_function__",
                                                               "__torch_dispatch__"):
            out.deny(node, f"def {node.name}", _SUBCLASS)
        elif isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in inner:
            _check_name(node, aliases, out)
        elif isinstance(node, ast.Call):
            _check_call(node, aliases, out)
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
        return qual.split(".")[0] not in ("torch", "numpy")
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


def _check_class(node, aliases, out):
    if node.name == "Model":
        out.add(node.lineno, REFERENCE, "class Model redefines the task's reference model")
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
    if not isinstance(node, ast.Name):
        return
    qual = _resolve(top, aliases)
    if qual is not None:
        rule = _denied(qual)
        if rule is not None:
            out.deny(top, _shown(top, qual), rule)
    elif node.id in DENIED_NAMES:
        out.deny(top, f"{node.id}", DENIED_NAMES[node.id])


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
    qual = _resolve(target, aliases)
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
