#!/usr/bin/env python3
"""Where a candidate's first calls spend their time on a GPU (issue #21).

For each corpus solution, in a fresh process that starts as the verifier's
spare candidate processes do (a copy of a base Triton cache filled by a
separate process, CUDA's context and one launch already paid), the first
forward call of each input set the funnel would run (tiny, the task's own,
ragged, batch-1, bfloat16, larger) is timed, with Triton's compile stages,
the launcher stubs built with the host compiler, and everything else.

  python3 bench/triton_compile_profile.py --kernelbench DIR --solutions DIR \
      --tasks level1/19_ReLU level1/23_Softmax ... [--json OUT]

Run by hand on the GPU machine; it prints one table row per (task, set).
"""

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "verifier_worker", "harness"))

SETS = [
    ("tiny", {"size_scale": 0.125}, 64 << 20),
    ("task_inputs", {}, 256 << 20),
    ("secret", {}, 64 << 20),
    ("ragged", {"ragged": True}, 64 << 20),
    ("batch_1", {"batch_one": True}, 64 << 20),
    ("bfloat16", {"dtype": "bfloat16"}, 64 << 20),
    ("larger", {"size_scale": 1.5}, 256 << 20),
]


def _instrument(times):
    """Wraps Triton's compile stages and its launcher build so each adds its
    wall time to `times`."""
    import triton.backends.nvidia.compiler as nvc
    import triton.backends.nvidia.driver as nvd
    import triton.runtime.build as build

    def timed(name, fn):
        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                times[name] += time.perf_counter() - start
                times["n_" + name] += 1
        return wrapper

    original_add = nvc.CUDABackend.add_stages

    def add_stages(self, stages, options, *a, **k):
        original_add(self, stages, options, *a, **k)
        for name in list(stages):
            stages[name] = timed("stage_" + name, stages[name])
    nvc.CUDABackend.add_stages = add_stages
    if hasattr(nvd, "compile_module_from_src"):
        nvd.compile_module_from_src = timed("launcher", nvd.compile_module_from_src)
    for name in ("_build", "build"):
        if hasattr(build, name):
            setattr(build, name, timed("host_cc", getattr(build, name)))


def _child(args):
    """One solution in this fresh process; prints one JSON line per set."""
    import torch
    from kforge_harness import task_inputs, warmup
    os.environ["TRITON_CACHE_DIR"] = args.cache
    device = "cuda:0"
    start = time.perf_counter()
    warmup.warm_process(device)
    warm_s = time.perf_counter() - start
    times = collections.defaultdict(float)
    _instrument(times)
    task = task_inputs.load_task(open(args.task_file).read(), "kforge_task")
    start = time.perf_counter()
    import types
    solution = types.ModuleType("candidate")
    solution.__file__ = os.path.abspath(args.solution_file)
    sys.modules["candidate"] = solution
    # From its file, as the harness does: Triton reads kernel source with inspect.
    exec(compile(open(args.solution_file).read(), solution.__file__, "exec"), solution.__dict__)
    import_s = time.perf_counter() - start
    rows = []
    for name, spec, max_bytes in SETS:
        spec = task_inputs.fit_to_budget(task, dict(spec, name=name, seed=7), max_bytes)
        init, inputs, _ = task_inputs.make_inputs(task, spec, device=device)
        torch.cuda.synchronize()
        times.clear()
        start = time.perf_counter()
        model = solution.ModelNew(*init).to(device)
        if spec.get("dtype"):
            model = model.to(getattr(torch, spec["dtype"]))
        build_s = time.perf_counter() - start
        start = time.perf_counter()
        try:
            model(*inputs)
            torch.cuda.synchronize()
            error = ""
        except Exception as e:  # a set the solution does not support
            error = f"{type(e).__name__}: {str(e)[:80]}"
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        model(*inputs) if not error else None
        torch.cuda.synchronize()
        second_s = time.perf_counter() - start
        rows.append(dict(set=name, build_s=build_s, first_s=first_s, second_s=second_s,
                         error=error, scale=spec.get("size_scale", 1.0), **times))
    print(json.dumps(dict(warm_s=warm_s, import_s=import_s, rows=rows)), flush=True)


def _fill(cache):
    from kforge_harness import warmup
    warmup.fill_base_cache(cache, "cuda:0")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernelbench", required=True)
    parser.add_argument("--solutions", required=True)
    parser.add_argument("--tasks", nargs="+", required=True)
    parser.add_argument("--json", default="")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache", default="", help=argparse.SUPPRESS)
    parser.add_argument("--task_file", default="", help=argparse.SUPPRESS)
    parser.add_argument("--solution_file", default="", help=argparse.SUPPRESS)
    parser.add_argument("--fill", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        return _fill(args.cache)
    if args.child:
        return _child(args)
    work = tempfile.mkdtemp(prefix="kf-compile-profile-")
    base = os.path.join(work, "base")
    start = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--fill", "--cache", base, "--kernelbench", "-",
                    "--solutions", "-", "--tasks", "-"], check=True)
    print(f"base cache filled in {time.perf_counter() - start:.2f} s")
    results = {}
    header = (f"{'task':34} {'set':12} {'scale':>6} {'first s':>8} {'2nd ms':>7} "
              f"{'compile':>8} {'ttir':>5} {'ttgir':>5} {'llir':>5} {'ptx':>5} {'cubin':>5} "
              f"{'launch':>6} {'n_k':>3} {'n_l':>3}")
    print(header)
    for task in args.tasks:
        cache = os.path.join(work, task.replace("/", "_"))
        shutil.copytree(base, cache)
        name = os.path.basename(task)
        child = subprocess.run(
            [sys.executable, __file__, "--child", "--cache", cache, "--kernelbench", "-",
             "--solutions", "-", "--tasks", "-",
             "--task_file", os.path.join(args.kernelbench, task + ".py"),
             "--solution_file", os.path.join(args.solutions, task + ".py")],
            capture_output=True, text=True)
        line = [x for x in child.stdout.splitlines() if x.startswith("{")]
        if child.returncode != 0 or not line:
            print(f"{task}: failed: {child.stderr[-400:]}")
            continue
        result = json.loads(line[-1])
        results[task] = result
        for r in result["rows"]:
            g = lambda k: r.get(k, 0.0)
            # The compile is its stages; a kernel compiled is one cubin made.
            compile_s = sum(v for k, v in r.items() if k.startswith("stage_"))
            print(f"{name[:34]:34} {r['set']:12} {r['scale']:6.3f} {r['first_s']:8.3f} "
                  f"{1000 * r['second_s']:7.2f} {compile_s:8.3f} "
                  f"{g('stage_ttir'):5.2f} {g('stage_ttgir'):5.2f} {g('stage_llir'):5.2f} "
                  f"{g('stage_ptx'):5.2f} {g('stage_cubin'):5.2f} {g('launcher'):6.3f} "
                  f"{int(g('n_stage_cubin')):3d} {int(g('n_host_cc')):3d} {r['error']}")
        print(f"{name[:34]:34} warm-up {result['warm_s']:.2f} s, import {result['import_s']:.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
