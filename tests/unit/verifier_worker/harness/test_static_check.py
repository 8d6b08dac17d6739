"""Specification of the verifier's stage-1 static checker (static_check.py).

Run from the repository root:
    python3 -m unittest discover -s tests/unit/verifier_worker/harness -v
Standard library only; the checker never runs the candidates below.
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HARNESS_DIR = Path(__file__).resolve().parents[4] / "verifier_worker" / "harness"
sys.path.insert(0, str(HARNESS_DIR))

from kforge_harness import static_check  # noqa: E402
from kforge_harness.static_check import check_source  # noqa: E402

# A correct Triton candidate. FORWARD_EXTRA is replaced by extra forward lines,
# INIT_EXTRA by extra __init__ lines and MODULE_EXTRA by extra module-level code.
TEMPLATE = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl
MODULE_EXTRA


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        INIT_EXTRA

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        FORWARD_EXTRA
        relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y.view(x.shape)


def get_inputs():
    return [torch.randn(64, 4096)]


def get_init_inputs():
    return []
'''


def candidate(forward="pass", init="pass", module=""):
    """TEMPLATE with the given lines spliced in at the right indentation."""
    src = TEMPLATE.replace("MODULE_EXTRA", textwrap.dedent(module).strip())
    src = src.replace("INIT_EXTRA", textwrap.indent(textwrap.dedent(init).strip(), " " * 8)[8:])
    return src.replace("FORWARD_EXTRA",
                       textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)[8:])


def line_of(source, marker):
    """1-based number of the first line containing marker."""
    for number, line in enumerate(source.splitlines(), 1):
        if marker in line:
            return number
    raise AssertionError(f"{marker!r} not in source")


class StaticCheckTest(unittest.TestCase):
    def assertFlagged(self, source, flag, marker, require_triton=True):
        """The source fails with `flag` reported on the line holding `marker`."""
        result = check_source(source, require_triton=require_triton)
        self.assertFalse(result["ok"])
        line = line_of(source, marker)
        hits = [f for f in result["findings"] if f["flag"] == flag and f["line"] == line]
        self.assertTrue(hits, f"no {flag} on line {line}; findings: "
                        + json.dumps(result["findings"], indent=1))
        self.assertTrue(hits[0]["message"].startswith(f"line {line}: "))
        return result

    def assertOk(self, source, require_triton=True):
        result = check_source(source, require_triton=require_triton)
        self.assertEqual(result["findings"], [])
        self.assertTrue(result["ok"])
        return result

    # --- structure (rules 1-3) --------------------------------------------------

    def test_correct_triton_relu_passes_and_lists_its_kernel(self):
        result = self.assertOk(candidate())
        self.assertEqual(result["kernels"], ["relu_kernel"])
        self.assertEqual(result["launched_kernels"], ["relu_kernel"])
        self.assertEqual(len(result["normalized_sha256"]), 64)
        json.dumps(result)  # JSON-serialisable as is

    def test_kernel_defined_but_not_launched_fails(self):
        source = candidate().replace("        relu_kernel[(triton.cdiv(n, 1024),)]"
                                     "(x, y, n, BLOCK=1024)\n", "")
        result = check_source(source)
        self.assertFalse(result["ok"])
        self.assertEqual(result["kernels"], ["relu_kernel"])
        self.assertEqual(result["launched_kernels"], [])
        self.assertIn("forward launches no @triton.jit kernel",
                      " ".join(f["message"] for f in result["findings"]))
        self.assertEqual({f["flag"] for f in result["findings"]}, {""})

    def test_no_kernel_defined_fails(self):
        source = "import torch.nn as nn\nclass ModelNew(nn.Module):\n" \
                 "    def forward(self, x):\n        return x\n"
        result = check_source(source)
        self.assertFalse(result["ok"])
        self.assertIn("defines no @triton.jit kernel", result["findings"][0]["message"])

    def test_missing_model_new_fails(self):
        result = check_source(candidate().replace("class ModelNew", "class Other"))
        self.assertFalse(result["ok"])
        self.assertTrue(any(f["message"].startswith("no class ModelNew") and f["flag"] == ""
                            for f in result["findings"]), result["findings"])

    def test_launch_through_helper_function_passes(self):
        source = textwrap.dedent('''\
            import torch
            from torch import nn
            from triton import jit, cdiv
            import triton, triton.language as tl

            @triton.autotune(configs=[triton.Config({"BLOCK": 256})], key=["n"])
            @jit
            def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

            def _launch(x, y):
                copy_kernel[lambda meta: (cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())

            def copy(x):
                y = torch.empty_like(x)
                _launch(x, y)
                return y

            class ModelNew(nn.Module):
                def forward(self, x):
                    return self._run(x)

                def _run(self, x):
                    return copy(x)
            ''')
        result = self.assertOk(source)
        self.assertEqual(result["kernels"], ["copy_kernel"])
        self.assertEqual(result["launched_kernels"], ["copy_kernel"])

    def test_launch_through_autograd_function_and_submodule_passes(self):
        source = candidate(module='''
            class _Relu(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = torch.empty_like(x)
                    relu_kernel[(1,)](x, y, x.numel(), BLOCK=1024)
                    return y

            relu = _Relu.apply  # the Triton tutorials' pattern

            class Block(nn.Module):
                def forward(self, x):
                    return relu(x)
            ''', init="self.block = Block()")
        launch = "        relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)\n"
        source = source.replace(launch + "        return y.view(x.shape)",
                                "        return self.block(x)")
        result = self.assertOk(source)
        self.assertEqual(result["launched_kernels"], ["relu_kernel"])

    def test_syntax_error_reports_its_line(self):
        source = "import torch\n\nclass ModelNew(:\n    pass\n"
        result = check_source(source)
        self.assertFalse(result["ok"])
        self.assertEqual(len(result["findings"]), 1)
        self.assertEqual(result["findings"][0]["line"], 3)
        self.assertEqual(result["findings"][0]["flag"], "")
        self.assertIn("syntax error", result["findings"][0]["message"])
        self.assertEqual(result["normalized_sha256"], "")

    def test_oversize_source_is_rejected_with_a_single_finding(self):
        source = candidate() + "#" * 300_000
        result = check_source(source)
        self.assertFalse(result["ok"])
        self.assertEqual(len(result["findings"]), 1)
        self.assertIn("over the 262144-byte limit", result["findings"][0]["message"])
        self.assertFalse(check_source(candidate(), max_bytes=100)["ok"])

    def test_unknown_import_is_a_plain_failure(self):
        source = candidate(module="import einops")
        result = self.assertFlagged(source, "", "import einops")
        self.assertIn("allowlist", result["findings"][0]["message"])

    def test_findings_are_sorted_by_line(self):
        source = candidate(forward="import os\neval('1')", module="import subprocess")
        lines = [f["line"] for f in check_source(source)["findings"]]
        self.assertEqual(lines, sorted(lines))
        self.assertGreaterEqual(len(lines), 3)

    # --- rule 4: torch fallback -----------------------------------------------------

    def test_torch_matmul_in_forward_is_a_fallback(self):
        source = candidate(forward="z = torch.matmul(x, x)")
        result = self.assertFlagged(source, "HACK_TORCH_FALLBACK", "torch.matmul")
        message = [f["message"] for f in result["findings"]][0]
        self.assertIn("torch.matmul in forward", message)
        self.assertIn("(torch fallback)", message)

    def test_aliased_torch_is_still_caught(self):
        source = candidate(module="import torch as T", forward="z = T.matmul(x, x)")
        result = self.assertFlagged(source, "HACK_TORCH_FALLBACK", "T.matmul")
        self.assertIn("torch.matmul", result["findings"][0]["message"])
        source = candidate(module="mm = torch.mm", forward="z = mm(x, x)")
        self.assertFlagged(source, "HACK_TORCH_FALLBACK", "z = mm(x, x)")
        source = candidate(module="from torch.nn import functional as Fn",
                           forward="z = Fn.gelu(x)")
        self.assertFlagged(source, "HACK_TORCH_FALLBACK", "Fn.gelu")

    def test_tensor_compute_methods_and_matmul_operator_are_fallbacks(self):
        for line in ("z = x.sum(dim=-1)", "z = x.softmax(-1)", "z = x.exp().clone()",
                     "z = x @ x", "y.copy_(x.relu())"):
            with self.subTest(line=line):
                self.assertFlagged(candidate(forward=line), "HACK_TORCH_FALLBACK", line)

    def test_nn_layer_in_init_is_a_fallback(self):
        source = candidate(init="self.fc = nn.Linear(16, 16)")
        self.assertFlagged(source, "HACK_TORCH_FALLBACK", "nn.Linear")
        source = candidate(init="self.act = torch.nn.ReLU()")
        self.assertFlagged(source, "HACK_TORCH_FALLBACK", "torch.nn.ReLU")

    def test_torch_compile_anywhere_is_a_fallback(self):
        source = candidate(module="compiled = torch.compile(lambda t: t)")
        self.assertFlagged(source, "HACK_TORCH_FALLBACK", "torch.compile")

    def test_fallback_in_a_helper_reached_from_forward_is_caught(self):
        source = candidate(module="def helper(t):\n    return torch.nn.functional.relu(t)",
                           forward="z = helper(x)")
        self.assertFlagged(source, "HACK_TORCH_FALLBACK", "return torch.nn.functional.relu")

    def test_allocation_view_and_init_ops_are_allowed(self):
        source = candidate(
            init='''
                self.weight = nn.Parameter(torch.empty(16, 16, dtype=torch.float32))
                nn.init.kaiming_uniform_(self.weight)
                self.bias = nn.Parameter(torch.zeros(16))
                self.blocks = nn.ModuleList([nn.Identity()])
            ''',
            forward='''
                w = self.weight.t().contiguous().to(torch.float16).view(-1)
                out = torch.empty((x.size(0), x.shape[1]), device=x.device, dtype=x.dtype)
                out.fill_(0)
                a, b = x.chunk(2, dim=0)
                dev = torch.cuda.current_device() if torch.cuda.is_available() else None
                sizes = (x.stride(0), x.dim(), x.element_size(), triton.next_power_of_2(n))
                with torch.no_grad():
                    pass
            ''')
        self.assertOk(source)

    def test_own_method_named_like_a_torch_op_is_not_a_fallback(self):
        source = candidate(module='''
            class Wrapped(nn.Module):
                def relu(self, x):
                    y = torch.empty_like(x)
                    relu_kernel[(1,)](x, y, x.numel(), BLOCK=1024)
                    return y

                def forward(self, x):
                    return self.relu(x)
            ''', init="self.inner = Wrapped()", forward="z = self.inner(x).sum")
        # Wrapped.relu is reached (and allowed); the .sum on its result is not.
        result = self.assertFlagged(source, "HACK_TORCH_FALLBACK", "self.inner(x).sum")
        self.assertEqual(len(result["findings"]), 1, result["findings"])
        self.assertOk(source.replace(".sum", ""))

    # --- rules 5-15 ---------------------------------------------------------------------

    def test_try_except_is_a_fallback(self):
        source = candidate(forward="try:\n    z = 1\nexcept Exception:\n    z = 2")
        self.assertFlagged(source, "HACK_TRY_EXCEPT_FALLBACK", "try:")
        source = candidate(module="from contextlib import suppress",
                           forward="with suppress(RuntimeError):\n    z = 1")
        self.assertFlagged(source, "HACK_TRY_EXCEPT_FALLBACK", "with suppress")

    def test_import_guards_are_not_fallbacks(self):
        # Optional imports wrap no computation: accepted, wherever they sit.
        for guard in ("try:\n    import typing_extensions as te\nexcept ImportError:\n    te = None",
                      "try:\n    from triton.language.extra import libdevice\n"
                      "except (ImportError, AttributeError):\n    libdevice = None\n"
                      "else:\n    HAVE_LIBDEVICE = True",
                      "try:\n    import math\nexcept ModuleNotFoundError:\n"
                      "    raise RuntimeError('math is required')",
                      "try:\n    import typing_extensions\nexcept Exception:\n    pass"):
            with self.subTest(guard=guard):
                self.assertOk(candidate(module=guard))
                self.assertOk(candidate(init=guard))

    def test_a_try_that_wraps_computation_is_a_fallback_even_beside_an_import(self):
        for guarded in ("try:\n    import math\n    y = torch.relu(x)\nexcept ImportError:\n    pass",
                        "try:\n    import math\nexcept ImportError:\n    y = torch.relu(x)",
                        "try:\n    import math\nfinally:\n    z = 1",
                        "try:\n    import math\n    relu_kernel[(1,)](x, y, n, BLOCK=1024)\n"
                        "except Exception:\n    pass",
                        # An alias of a library op bound inside a guard.
                        "try:\n    import math\n    mm = torch.matmul\nexcept ImportError:\n"
                        "    raise"):
            with self.subTest(guarded=guarded):
                self.assertFlagged(candidate(forward=guarded), "HACK_TRY_EXCEPT_FALLBACK", "try:")

    def test_numpy_and_the_array_protocols_are_raw_memory(self):
        # NumPy's arrays over an address another object names, or a view
        # strided past its buffer, read and write the process's memory (a
        # red team read the harness's objects and the inputs of calls still
        # to come that way): no part of NumPy, nothing that hands it a
        # tensor, nothing that claims to be an array.
        # An import of it is a plain failure (off the allowlist, no flag):
        # a model may write one from habit.
        for module in ("import numpy as np", "from numpy.lib.stride_tricks import as_strided"):
            with self.subTest(module=module):
                self.assertFlagged(candidate(module=module), "", "numpy")
        cases = [
            ({"forward": "a = x.cpu().numpy()"}, ".numpy"),
            ({"forward": "a = x.__array__()"}, ".__array__"),
            ({"module": "class Raw:\n    __array_interface__ = {'data': (0, False)}"},
             "__array_interface__"),
            ({"module": "class Raw:\n    def __cuda_array_interface__(self):\n        return {}"},
             "def __cuda_array_interface__"),
            ({"module": "import types",
              "forward": "r = types.SimpleNamespace(**{'__array_interface__': {}})"},
             "'__array_interface__'"),
            ({"module": "import types",
              "forward": "r = types.SimpleNamespace(__array_struct__=1)"}, "__array_struct__"),
            ({"forward": "t = torch.utils.dlpack.from_dlpack(x)"}, "from_dlpack"),
        ]
        for parts, marker in cases:
            with self.subTest(marker=marker):
                self.assertFlagged(candidate(**parts), "HACK_INTROSPECTION", marker)

    def test_the_interpreter_and_raw_storages_reached_by_other_spellings(self):
        # Red teams' rounds 8 and 9: each reached the harness's frames or
        # raw memory, and from there the inputs of calls still to come.
        cases = [
            ({"forward": "b = len.__self__"}, ".__self__"),
            ({"forward": "f = torch.relu.__wrapped__"}, ".__wrapped__"),
            ({"forward": "m = (lambda v: v)(x).__import__('sys')"}, ".__import__"),
            ({"forward": "g = (lambda v: v)(x).getattr(x, 'shape')"}, ".getattr"),
            ({"forward": "base = type(x).__base__"}, ".__base__"),
            ({"forward": "bases = type(x).mro()"}, ".mro"),
            ({"forward": "s = torch.UntypedStorage._new_with_weak_ptr(0)"}, "_new_with_weak_ptr"),
            ({"forward": "s = x.storage()"}, ".storage"),
            ({"forward": "s = x.untyped_storage()"}, ".untyped_storage"),
            ({"forward": "y = torch.empty(0).set_(x)"}, ".set_"),
            ({"forward": "match len:\n    case object(__self__=b):\n        pass"}, "case object"),
            ({"forward": "s = super(torch.nn.Module, self).__init__()"}, "super(torch"),
            # Round 12: a module's live __dict__ from the pickle protocol.
            ({"forward": "g = torch.__getstate__()"}, "__getstate__"),
            # Round 11: readers of an attribute or a dict entry by string.
            ({"module": "import functools", "forward": "cp = functools.cached_property(len)"},
             "cached_property"),
            ({"forward": "cp = (lambda v: v)(x)\ncp.attrname = 'sys'"}, "attrname"),
            ({"module": "import operator", "forward": "g = (lambda m: m)(operator).attrgetter"},
             ".attrgetter"),
            # Round 13: enum's module plumbing, reading a module's globals
            # (_convert_) or writing a class's members into a module named
            # by its __module__ string (global_enum).
            ({"module": "import enum",
              "forward": "e = [enum.Enum][0]._convert_('L', 'm', len, source=torch)"},
             "._convert_"),
            ({"module": "import enum", "forward": "g = (lambda m: m)(enum).global_enum"},
             ".global_enum"),
            ({"module": "class Hooks:\n    __module__ = 'kforge_harness.timing'"},
             "__module__"),
            ({"module": "from enum import global_enum"}, "global_enum"),
            # Round 17: special methods bound to callables that are not defs
            # run with no frame of the candidate's.
            ({"module": "import functools\nclass Fin:\n    __del__ = functools.partial(print)"},
             "__del__ ="),
            ({"module": "class Slots(dict):\n    __setattr__ = dict.__setitem__"},
             "__setattr__ ="),
            # Round 21: torch's TorchScript plumbing reads closures and globals
            # as plain attributes, reached through a parameter.
            ({"module": "def inner(m):\n    return m._jit_internal.get_closure"},
             "._jit_internal"),
            # Round 19: copy's registry of reducers, filled by another spelling.
            ({"module": "import copy", "forward": "t = copy.dispatch_table\nt.update({})"},
             "copy.dispatch_table"),
            ({"module": "H = type('H', (), {'__module__': 'kforge_harness.timing'})"},
             "'__module__'"),
        ]
        for parts, marker in cases:
            with self.subTest(marker=marker):
                self.assertFlagged(candidate(**parts), "HACK_INTROSPECTION", marker)
        self.assertFlagged(
            candidate(module="class Quiet:\n    def __exit__(self, *e):\n        return True"),
            "HACK_TRY_EXCEPT_FALLBACK", "def __exit__")
        # Round 21: an exit callback that returns true swallows as well.
        self.assertFlagged(candidate(module="import contextlib\nstack = contextlib.ExitStack()"),
                           "HACK_TRY_EXCEPT_FALLBACK", "ExitStack")
        self.assertOk(candidate(module="class Data:\n    __slots__ = ('a',)\n    __hash__ = None"))
        self.assertOk(candidate(module="class V:\n    def __mul__(self, o):\n        return o\n"
                                       "    __rmul__ = __mul__"))
        # KernelBench's own spelling of super() stays the candidate's.
        self.assertOk(candidate(init="super(ModelNew, self).__init__()"))

    def test_the_profiler_is_the_harness_s(self):
        source = candidate(forward="torch.profiler.profile()")
        self.assertFlagged(source, "HACK_INTROSPECTION", "torch.profiler")

    def test_reference_model_reuse(self):
        source = candidate().replace("class ModelNew(nn.Module)", "class ModelNew(Model)")
        self.assertFlagged(source, "HACK_REFERENCE_REUSE", "class ModelNew(Model)")
        source = candidate(forward="z = super(Model, self).forward(x)")
        self.assertFlagged(source, "HACK_REFERENCE_REUSE", "super(Model")
        source = candidate(module="from reference import Model")
        self.assertFlagged(source, "HACK_REFERENCE_REUSE", "from reference import Model")

    def test_introspection(self):
        cases = [
            ({"module": "import inspect"}, "import inspect"),
            ({"module": "import sys"}, "import sys"),
            ({"forward": "g = eval('x')"}, "eval("),
            ({"forward": "g = getattr(x, name)"}, "getattr(x, name)"),
            ({"forward": "g = x.__dict__"}, "x.__dict__"),
            ({"forward": "g = type(x).__subclasses__()"}, "__subclasses__"),
            ({"forward": "g = torch._C._get_tracing_state()"}, "torch._C"),
            ({"forward": "torch.backends.cuda.matmul.allow_tf32 = True"}, "allow_tf32"),
            ({"forward": "g = globals()"}, "globals()"),
        ]
        for parts, marker in cases:
            with self.subTest(marker=marker):
                self.assertFlagged(candidate(**parts), "HACK_INTROSPECTION", marker)

    def test_a_denied_module_reached_as_another_modules_attribute_is_denied(self):
        # typing, warnings and contextlib import sys and os: `typing.sys` is
        # sys, whatever it is spelled as. What a name is gets looked up in
        # the live modules, not read from its spelling.
        cases = [
            ({"module": "import typing\n_m = typing.sys.modules"}, "typing.sys", "INTROSPECTION"),
            ({"forward": "import warnings\nw = warnings.sys"}, "warnings.sys", "INTROSPECTION"),
            ({"module": "from contextlib import os as _o"}, "from contextlib", "SUBPROCESS"),
            ({"forward": "import typing\ng = getattr(typing, 'sys')"}, "getattr(typing",
             "INTROSPECTION"),
            ({"module": "import dataclasses\n_i = dataclasses.inspect"}, "dataclasses.inspect",
             "INTROSPECTION"),
        ]
        for parts, marker, flag in cases:
            with self.subTest(marker=marker):
                result = self.assertFlagged(candidate(**parts), f"HACK_{flag}", marker)
                self.assertTrue(any(" is " in f["message"] for f in result["findings"]),
                                result["findings"])

    @unittest.skipUnless(importlib.util.find_spec("torch"), "needs torch")
    def test_torch_attributes_that_are_denied_modules_are_denied(self):
        for expr in ("torch.sys.modules", "torch.os.system", "torch.builtins.__import__"):
            with self.subTest(expr=expr):
                result = check_source(candidate(forward=f"g = {expr}"))
                self.assertFalse(result["ok"])
                self.assertTrue(any(" is " in f["message"] for f in result["findings"]),
                                result["findings"])
        # What torch's public names are stays as spelled.
        self.assertOk(candidate(forward="g = torch.cuda.is_available()\nh = torch.float32"))

    def test_attribute_getters_by_string_are_denied(self):
        cases = [
            {"forward": "g = getattr\nh = g(x, 'shape')"},
            {"forward": "h = list(map(getattr, [x], ['shape']))"},
            {"module": "import operator\n_f = operator.attrgetter('shape')"},
            {"module": "import operator\n_f = operator.methodcaller('sum')"},
            {"module": "import string\n_f = string.Formatter()"},
            {"module": "import typing\n_h = typing.get_type_hints"},
        ]
        for parts in cases:
            with self.subTest(parts=parts):
                result = check_source(candidate(**parts))
                self.assertFalse(result["ok"])
                self.assertIn("HACK_INTROSPECTION", [f["flag"] for f in result["findings"]])
        # getattr called by its name with a constant is judged by that name.
        self.assertOk(candidate(forward="n = getattr(x, 'shape')"))

    def test_a_format_string_reads_only_its_arguments(self):
        # str.format follows a field's .name and [key] in C: a red team's
        # "{0.sys.modules[os].environ._data}".format(torch) read the
        # process's environment with every name inside a string.
        refused = [
            "s = '{0.sys.modules[os].environ}'.format(torch)",
            "s = '{0[x]}'.format({'x': 1})",
            "s = '{:{0.sys}}'.format(1, torch)",
            "s = ('{0.' + 'sys}').format(torch)",
            "t = '{0.sys}'\ns = t.format(torch)",
            "s = str.format('{0.sys}', torch)",
            "f = '{}'.format\ns = f(torch)",
            "s = '{t.sys}'.format_map({'t': torch})",
            "s = '{}'.format_map({})",
            "f = getattr('{0.sys}', 'format')",
        ]
        for line in refused:
            with self.subTest(line=line):
                source = candidate(forward=line)
                result = check_source(source)
                self.assertFalse(result["ok"])
                self.assertIn("HACK_INTROSPECTION", [f["flag"] for f in result["findings"]])
        # Plain fields in a literal, and f-strings (whose expressions the
        # checker reads like any other), are formatting.
        for line in ["s = '{} x {:.3f} {0} {name!r:>{width}}'.format(1, 2.0, name=3, width=4)",
                     "s = f'{x.shape} {1 + 2:.2f}'",
                     "s = 'a {{literal}} brace'.format()"]:
            with self.subTest(line=line):
                self.assertOk(candidate(forward=line))

    def test_modules_looked_up_by_a_string_for_the_candidate_are_denied(self):
        # Round 23: torch's _import_dotted_name and importlib's find_spec
        # (held as torch.cuda.amp.common.find_spec) handed a red team sys.
        for line in ["s = (lambda m: m)(torch)._import_dotted_name('sys')",
                     "s = f('sys').loader.load_module('sys')",
                     "m = (lambda m: m)(torch).sys_like.modules",
                     "m = x.modules['kforge_harness.timing']",
                     "k = (lambda m: m)(torch)._is_type",
                     "k = (lambda m: m)(torch)._old_convert_"]:
            with self.subTest(line=line):
                result = check_source(candidate(forward=line))
                self.assertFalse(result["ok"])
                self.assertIn("HACK_INTROSPECTION", [f["flag"] for f in result["findings"]])
        # nn.Module.modules() is a method.
        self.assertOk(candidate(forward="n = len(list(self.modules()))"))

    def test_an_annotation_string_that_is_code_is_denied(self):
        source = candidate(module="def _f(a: \"__import__('os')\") -> None:\n    pass")
        self.assertFlagged(source, "HACK_INTROSPECTION", "__import__('os')")
        # A forward reference by name is not code.
        self.assertOk(candidate(module="def _f(a: \"ModelNew\", b: 'torch.Tensor') -> None:"
                                       "\n    pass"))

    def test_time_module_is_the_harnesss(self):
        source = candidate(module="from time import perf_counter",
                           forward="t0 = perf_counter()")
        result = self.assertFlagged(source, "HACK_INTROSPECTION", "from time import")
        self.assertIn("time functions are the harness's", result["findings"][0]["message"])
        self.assertFlagged(source, "HACK_INTROSPECTION", "t0 = perf_counter()")

    def test_concurrency(self):
        cases = [
            ({"module": "import threading"}, "import threading"),
            ({"module": "from concurrent.futures import ThreadPoolExecutor"}, "concurrent"),
            ({"forward": "s = torch.cuda.Stream()"}, "torch.cuda.Stream"),
            ({"forward": "torch.cuda.synchronize()"}, "synchronize"),
            ({"forward": "y.record_stream(s)"}, "record_stream"),
            ({"forward": "e = torch.cuda.Event(enable_timing=True)"}, "torch.cuda.Event"),
        ]
        for parts, marker in cases:
            with self.subTest(marker=marker):
                self.assertFlagged(candidate(**parts), "HACK_CONCURRENCY", marker)

    def test_subprocess(self):
        self.assertFlagged(candidate(module="import subprocess"), "HACK_SUBPROCESS",
                           "import subprocess")
        source = candidate(module="import os", forward="os.system('nvidia-smi')")
        self.assertFlagged(source, "HACK_SUBPROCESS", "import os")
        self.assertFlagged(source, "HACK_SUBPROCESS", "os.system(")
        source = candidate(module="from os import system as run", forward="run('ls')")
        self.assertFlagged(source, "HACK_SUBPROCESS", "run('ls')")

    def test_early_exit_is_result_forgery(self):
        for parts, marker in [({"module": "import sys", "forward": "sys.exit(0)"}, "sys.exit"),
                              ({"module": "import os", "forward": "os._exit(0)"}, "os._exit"),
                              ({"forward": "exit()"}, "exit()"),
                              ({"forward": "raise SystemExit"}, "SystemExit")]:
            with self.subTest(marker=marker):
                self.assertFlagged(candidate(**parts), "HACK_RESULT_FORGERY", marker)

    def test_network(self):
        self.assertFlagged(candidate(module="import socket"), "HACK_NETWORK", "import socket")
        self.assertFlagged(candidate(module="from urllib.request import urlopen"),
                           "HACK_NETWORK", "urllib")

    def test_file_access(self):
        cases = [
            ({"forward": "data = open('/etc/passwd').read()"}, "open("),
            ({"module": "import pathlib"}, "import pathlib"),
            ({"forward": "torch.save(y, 'out.pt')"}, "torch.save"),
            ({"module": "import numpy as np", "forward": "np.save('a.npy', 1)"}, "np.save"),
            # Maps any readable file; with shared=True, writes one.
            ({"forward": "s = torch.UntypedStorage.from_file('/etc/hostname', False, 4)"},
             "from_file"),
            ({"forward": "s = torch.ByteStorage.from_file('lib.so', True, 4096)"}, "from_file"),
            ({"forward": "s = torch.UntypedStorage._new_shared_filename_cpu(0, 'kf', 4)"},
             "_new_shared_filename_cpu"),
            # Pickles (code of their own) and files by other names.
            ({"forward": "m = torch.serialization.load('p.pt')"}, "torch.serialization"),
            ({"forward": "m = torch.jit.load('m.pt')"}, "torch.jit.load"),
            ({"forward": "m = torch.package.PackageImporter('p.pt')"}, "torch.package"),
            ({"module": "import numpy as np",
              "forward": "a = np.lib.format.open_memmap('a.npy', mode='w+', shape=(4,))"},
             "open_memmap"),
            ({"module": "import numpy as np", "forward": "a = np.DataSource().open('/etc/passwd')"},
             "np.DataSource"),
        ]
        for parts, marker in cases:
            with self.subTest(marker=marker):
                self.assertFlagged(candidate(**parts), "HACK_FILE_ACCESS", marker)

    def test_library_workers_networks_and_runtime_controls(self):
        cases = [
            ({"forward": "d = torch.utils.data.DataLoader([1], num_workers=2)"},
             "HACK_CONCURRENCY", "torch.utils.data"),
            ({"forward": "torch.distributed.init_process_group('gloo')"}, "HACK_NETWORK",
             "torch.distributed"),
            ({"forward": "torch.cuda.cudart().cudaProfilerStop()"}, "HACK_INTROSPECTION",
             "torch.cuda.cudart"),
            ({"forward": "t = torch.utils.benchmark.Timer('x')"}, "HACK_INTROSPECTION",
             "torch.utils.benchmark"),
        ]
        for parts, flag, marker in cases:
            with self.subTest(marker=marker):
                self.assertFlagged(candidate(**parts), flag, marker)

    def test_native_code_of_its_own(self):
        cases = [
            ({"module": "torch.ops.load_library('lib.so')"}, "load_library"),
            ({"init": "torch.classes.load_library('lib.so')"}, "load_library"),
            ({"module": "from triton.runtime.build import compile_module_from_src"},
             "triton.runtime.build"),
            ({"forward": "m = triton.runtime.build.compile_module_from_src('int x;', 'm')"},
             "compile_module_from_src"),
        ]
        for parts, marker in cases:
            with self.subTest(marker=marker):
                result = self.assertFlagged(candidate(**parts), "HACK_INTROSPECTION", marker)
                self.assertTrue(any("native code" in f["message"] for f in result["findings"]))

    def test_monkeypatching_imported_modules(self):
        cases = [
            ({"module": "torch.allclose = lambda *a, **k: True"}, "torch.allclose ="),
            ({"module": "import torch.nn.functional as F\nF.relu = print"}, "F.relu ="),
            ({"forward": "torch.cuda.Event.elapsed_time = lambda s, e: 0.001"}, "elapsed_time"),
            ({"module": "import time\ntime.perf_counter = lambda: 0.0"}, "time.perf_counter ="),
            ({"module": "torch.Tensor.__add__ = torch.Tensor.__sub__"}, "__add__ ="),
            ({"module": "setattr(torch, 'allclose', print)"}, "setattr(torch"),
            ({"module": "del torch.allclose"}, "del torch"),
            ({"module": "triton.cdiv += 0"}, "triton.cdiv +="),
        ]
        for parts, marker in cases:
            with self.subTest(marker=marker):
                self.assertFlagged(candidate(**parts), "HACK_MONKEYPATCH", marker)

    def test_attributes_of_objects_the_checker_cannot_name(self):
        # Rooted at a call, a subscript or a parameter, a chain is judged by
        # its names: the last step of a denied dotted name, a module held
        # under another name (enum.bltns is builtins, random._os is os).
        cases = [
            ({"module": "import enum\nb = (lambda m: m.bltns)(enum)"}, "HACK_INTROSPECTION", "bltns"),
            ({"module": "import random\nq = [random][0]._os"}, "HACK_SUBPROCESS", "_os"),
            ({"forward": "[torch][0].set_num_threads(2)"}, "HACK_MONKEYPATCH", "set_num_threads"),
            ({"module": "def widen(m):\n    m.set_num_threads(2)"}, "HACK_MONKEYPATCH",
             "set_num_threads"),
            ({"module": "lib = [torch][0].library.Library('aten', 'IMPL')"}, "HACK_MONKEYPATCH",
             "library"),
            ({"module": "f = (lambda t: t)(torch).backends"}, "HACK_INTROSPECTION", "backends"),
            ({"module": "def core(m):\n    return m._C"}, "HACK_INTROSPECTION", "_C"),
            ({"module": "w = (lambda t: t)(torch).nn.modules.module.weakref"},
             "HACK_INTROSPECTION", "weakref"),
            ({"module": "g = getattr([torch][0], 'set_num_threads')"}, "HACK_MONKEYPATCH",
             "set_num_threads"),
        ]
        for parts, flag, marker in cases:
            with self.subTest(marker=marker):
                self.assertFlagged(candidate(**parts), flag, marker)

    def test_a_module_off_the_allowlist_held_by_an_allowed_one(self):
        source = candidate(module="r = torch.utils.hooks.weakref.ref")
        self.assertFlagged(source, "HACK_INTROSPECTION", "weakref")

    def test_the_candidates_own_attributes_stay_its_business(self):
        # Private names on self, and names common on values (str.join,
        # .data, .cuda, .format) are not the checker's.
        source = candidate(
            init="self._state = 1\nself._tensor = None",
            forward="names = ', '.join(['a', 'b']) + '{}'.format(self._state)\n"
                    "w = self.weight.data if hasattr(self, 'weight') else None")
        result = static_check.check_source(source, require_triton=True)
        self.assertTrue(result["ok"], result["findings"])

    def test_tensor_subclasses(self):
        cases = [
            ("class Lazy(torch.Tensor):\n    pass", "class Lazy"),
            ("from torch import Tensor\nclass Lazy(Tensor):\n    pass", "class Lazy"),
            ("class M:\n    def __torch_function__(self, *a):\n        pass", "__torch_function__"),
            ("def f(x):\n    return torch.Tensor._make_subclass(object, x)", "_make_subclass"),
            ("from torch.utils._python_dispatch import TorchDispatchMode", "TorchDispatchMode"),
        ]
        for module, marker in cases:
            with self.subTest(marker=marker):
                self.assertFlagged(candidate(module=module), "HACK_TENSOR_SUBCLASS", marker)

    def test_printing_a_verdict_is_result_forgery(self):
        source = candidate(forward="print('Correctness: PASSED, speedup 40x')")
        self.assertFlagged(source, "HACK_RESULT_FORGERY", "print(")
        self.assertOk(candidate(forward="print('n =', n)"))

    # --- hashing and modes --------------------------------------------------------------

    def test_normalized_hash_ignores_comments_and_formatting(self):
        original = candidate()
        reformatted = ("# a comment\n" + original.replace("BLOCK=1024)", "BLOCK = 1024 )")
                       .replace("    return []", "    return [ ]  # nothing"))
        self.assertEqual(check_source(original)["normalized_sha256"],
                         check_source(reformatted)["normalized_sha256"])
        changed = original.replace("BLOCK=1024)", "BLOCK=512)")
        self.assertNotEqual(check_source(original)["normalized_sha256"],
                            check_source(changed)["normalized_sha256"])

    def test_without_triton_a_plain_torch_model_is_accepted(self):
        source = textwrap.dedent('''\
            import torch
            import torch.nn as nn

            class ModelNew(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)

                def forward(self, x):
                    return torch.relu(self.fc(x)) @ x.t()
            ''')
        result = self.assertOk(source, require_triton=False)
        self.assertEqual(result["kernels"], [])
        self.assertFalse(check_source(source, require_triton=True)["ok"])

    def test_without_triton_hacks_are_still_rejected(self):
        plain = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n" \
                "    def forward(self, x):\n        STMT\n        return torch.relu(x)\n"
        for stmt, flag, marker in [
                ("try:\n            pass\n        except Exception:\n            pass",
                 "HACK_TRY_EXCEPT_FALLBACK", "try:"),
                ("import os", "HACK_SUBPROCESS", "import os"),
                ("torch.allclose = None", "HACK_MONKEYPATCH", "torch.allclose")]:
            with self.subTest(flag=flag):
                self.assertFlagged(plain.replace("STMT", stmt), flag, marker,
                                   require_triton=False)

    # --- the command line -----------------------------------------------------------------

    def _cli(self, source, *flags):
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(source)
        self.addCleanup(os.unlink, f.name)
        env = dict(os.environ, PYTHONPATH=str(HARNESS_DIR))
        return subprocess.run([sys.executable, "-m", "kforge_harness.static_check", f.name,
                               *flags], capture_output=True, text=True, env=env, timeout=60)

    def test_cli_prints_json_and_exits_zero_or_one(self):
        ok = self._cli(candidate())
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertTrue(json.loads(ok.stdout)["ok"])
        bad = self._cli(candidate(forward="z = torch.mm(x, x)"))
        self.assertEqual(bad.returncode, 1, bad.stderr)
        self.assertEqual(json.loads(bad.stdout)["findings"][0]["flag"], "HACK_TORCH_FALLBACK")
        plain = self._cli("import torch\nclass ModelNew(torch.nn.Module):\n"
                          "    def forward(self, x):\n        return x.sum()\n",
                          "--no-require-triton")
        self.assertEqual(plain.returncode, 0, plain.stdout)

    def test_checker_imports_no_torch(self):
        code = "import sys, kforge_harness.static_check; print('torch' in sys.modules)"
        env = dict(os.environ, PYTHONPATH=str(HARNESS_DIR))
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=60)
        self.assertEqual(run.stdout.strip(), "False", run.stderr)
        self.assertFalse(hasattr(static_check, "torch"))


if __name__ == "__main__":
    unittest.main()
