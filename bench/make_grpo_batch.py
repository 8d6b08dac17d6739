"""Builds a GRPO-shaped batch of candidates for the verifier benchmark.

16 tasks (12 level 1, 4 level 2) x 8 candidates = 128, drawn from the
corpus of legitimate solutions (tasks/kernelbench-solutions) and from
deliberately broken variants of them, in a fixed mix that resembles early
policy output. Per task:
  3 correct   the solution, and two distinct rewrites of it (kernels
              renamed, so each is a new source to compile and verify)
  2 wrong     the stored value off by one; off by 0.1% (a tolerance check)
  2 errors    a Triton compile error (an unknown tl function); a launch
              error (a kernel argument dropped)
  1 static    the forward wrapped in try/except (a fallback shape)
and, across the batch, 2 candidates that hang replace two wrong ones: one
spins on the host in forward, one spins inside its Triton kernel.

Usage:
  python3 bench/make_grpo_batch.py --kernelbench DIR --out DIR [--tasks a,b,...]
writes DIR/candidates/<id>.py, DIR/tasks/<task>.py (copies of the task
sources the peer harness reads), DIR/batch.json: [{id, task, task_file,
candidate, kind, expect_correct}] in a shuffled, fixed order, and
DIR/pairs.json, the same for bench/kernelbench_peer.py.

Standard library only.
"""

import argparse
import ast
import json
import os
import random
import shutil
import sys

DEFAULT_TASKS = [
    "level1/1_Square_matrix_multiplication_", "level1/2_Standard_matrix_multiplication_",
    "level1/7_Matmul_with_small_K_dimension_", "level1/8_Matmul_with_irregular_shapes_",
    "level1/9_Tall_skinny_matrix_multiplication_", "level1/12_Matmul_with_diagonal_matrices_",
    "level1/16_Matmul_with_transposed_A", "level1/17_Matmul_with_transposed_B",
    "level1/40_LayerNorm", "level1/88_MinGPTNewGelu", "level1/23_Softmax", "level1/19_ReLU",
    "level2/12_Gemm_Multiply_LeakyReLU", "level2/76_Gemm_Add_ReLU",
    "level2/99_Matmul_GELU_Softmax", "level2/29_Matmul_Mish_Mish",
]


def _kernels(tree):
    """Names of @triton.jit (or autotune/heuristics) functions."""
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                text = ast.unparse(d)
                if "triton.jit" in text or "autotune" in text or "heuristics" in text:
                    names.append(node.name)
                    break
    return names


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_FunctionDef(self, node):
        node.name = self.mapping.get(node.name, node.name)
        self.generic_visit(node)
        return node

    def visit_Name(self, node):
        node.id = self.mapping.get(node.id, node.id)
        return node


def renamed(source, suffix):
    tree = ast.parse(source)
    mapping = {k: f"{k}_{suffix}" for k in _kernels(tree)}
    return ast.unparse(_Rename(mapping).visit(tree))


def _first_call(tree, predicate):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and predicate(node):
            return node
    return None


def _is_tl(name):
    return lambda call: ast.unparse(call.func) in (f"tl.{name}", f"triton.language.{name}")


def wrong_value(source, how):
    """The value of the first tl.store in a kernel, changed: `+ 1` or `* 1.001`."""
    tree = ast.parse(source)
    store = _first_call(tree, _is_tl("store"))
    if store is None or len(store.args) < 2:
        return None
    value = store.args[1]
    op, const = (ast.Add(), 1) if how == "plus_one" else (ast.Mult(), 1.001)
    store.args[1] = ast.BinOp(left=value, op=op, right=ast.Constant(const))
    return ast.unparse(tree)


def compile_error(source):
    tree = ast.parse(source)
    load = _first_call(tree, _is_tl("load"))
    if load is None:
        return None
    load.func = ast.Attribute(value=ast.Name(id="tl", ctx=ast.Load()), attr="load_tile",
                              ctx=ast.Load())
    return ast.unparse(tree)


def launch_error(source):
    """The first kernel launch (kernel[grid](...)) with its first argument dropped."""
    tree = ast.parse(source)
    kernels = set(_kernels(tree))
    launch = _first_call(tree, lambda c: isinstance(c.func, ast.Subscript)
                         and isinstance(c.func.value, ast.Name) and c.func.value.id in kernels
                         and c.args)
    if launch is None:
        return None
    launch.args = launch.args[1:]
    return ast.unparse(tree)


def _forward(tree):
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return item
    return None


def try_fallback(source):
    tree = ast.parse(source)
    fwd = _forward(tree)
    if fwd is None:
        return None
    handler = ast.ExceptHandler(type=ast.Name(id="Exception", ctx=ast.Load()), name=None,
                                body=[ast.Raise(exc=None, cause=None)])
    fwd.body = [ast.Try(body=fwd.body, handlers=[handler], orelse=[], finalbody=[])]
    return ast.unparse(ast.fix_missing_locations(tree))


def host_hang(source):
    tree = ast.parse(source)
    fwd = _forward(tree)
    spin = ast.parse("spin = 1\nwhile spin > 0:\n    spin = spin + 1").body
    fwd.body = spin + fwd.body
    return ast.unparse(ast.fix_missing_locations(tree))


def gpu_hang(source):
    """The first kernel never ends: a loop on a value that only grows."""
    tree = ast.parse(source)
    name = _kernels(tree)[0]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            spin = ast.parse("spin = tl.program_id(0) * 0.0 + 1.0\nwhile spin > 0.0:\n"
                             "    spin = spin + 1.0").body
            node.body = spin + node.body
    return ast.unparse(ast.fix_missing_locations(tree))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernelbench", required=True, help="KernelBench problems (level1/, level2/)")
    parser.add_argument("--solutions", default=os.path.join(os.path.dirname(__file__), "..",
                                                            "tasks", "kernelbench-solutions"))
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS))
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(os.path.join(args.out, "candidates"))
    os.makedirs(os.path.join(args.out, "tasks"))
    items = []
    tasks = [t for t in args.tasks.split(",") if t]
    for t_index, task in enumerate(tasks):
        task_file = os.path.join(args.kernelbench, task + ".py")
        solution_file = os.path.join(args.solutions, task + ".py")
        if not (os.path.exists(task_file) and os.path.exists(solution_file)):
            print(f"make_grpo_batch: no task or solution for {task}", file=sys.stderr)
            return 2
        copied = os.path.join(args.out, "tasks", task.replace("/", "__") + ".py")
        shutil.copy(task_file, copied)
        good = open(solution_file).read()
        variants = [
            ("correct", good), ("correct", renamed(good, "v2")),
            ("correct", '"""A rewrite."""\n' + renamed(good, "v3")),
            ("wrong", wrong_value(good, "plus_one")), ("wrong", wrong_value(good, "scaled")),
            ("error", compile_error(good)), ("error", launch_error(good)),
            ("static", try_fallback(good)),
        ]
        # Two hangs in the batch, in place of a wrong candidate each.
        if t_index == 0:
            variants[4] = ("hang", host_hang(good))
        if t_index == 1:
            variants[4] = ("hang", gpu_hang(good))
        for v_index, (kind, text) in enumerate(variants):
            if text is None:
                print(f"make_grpo_batch: cannot make a {kind} variant of {task}", file=sys.stderr)
                return 2
            ident = f"{task.replace('/', '__')}__{v_index}_{kind}"
            path = os.path.join(args.out, "candidates", ident + ".py")
            with open(path, "w") as f:
                f.write(text if text.endswith("\n") else text + "\n")
            items.append({"id": ident, "task": task, "task_file": copied, "candidate": path,
                          "kind": kind, "expect_correct": kind == "correct"})
    random.Random(args.seed).shuffle(items)
    with open(os.path.join(args.out, "batch.json"), "w") as f:
        json.dump(items, f, indent=1)
    # The same batch in the peer harness's shape (bench/kernelbench_peer.py).
    with open(os.path.join(args.out, "pairs.json"), "w") as f:
        json.dump([{"id": i["id"], "task": i["task_file"], "candidate": i["candidate"]}
                   for i in items], f, indent=1)
    kinds = {}
    for item in items:
        kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
    print(f"make_grpo_batch: {len(items)} candidates over {len(tasks)} tasks: "
          + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
