"""KernelBench's own evaluation as the peer of kforge's verifier: runs each
(task, candidate) pair through KernelBench's eval_kernel_against_ref with the
Triton backend, in a fresh Python process per candidate as KernelBench's
scripts do, one candidate at a time per GPU, and prints a table of what the
batch cost. Depends on nothing from kforge: only the standard library here
and, in the child, torch, triton, numpy and the exported KernelBench tree
(scripts/fetch-kernelbench.sh).

What KernelBench does and this mirrors (commit in the tree's stamp file):
- scripts/eval_from_generations.py and scripts/run_and_check.py call
  eval_kernel_against_ref(..., num_correct_trials=5, num_perf_trials=100,
  measure_performance=True, timing_method="cuda_event", precision=fp32,
  backend=<backend>) with check_for_excessive_speedup left at its default
  (True), so the reference is timed too (another num_perf_trials runs), and
  catch whatever it raises as a compile failure ("last level catch").
- eval_from_generations.py spreads candidates over GPUs as batches of
  num_gpu_devices spawned processes, device cuda:i, each batch waited for as a
  whole (--lockstep mirrors that; the default feeds each GPU its next
  candidate as soon as it is free).

usage:
  python3 bench/kernelbench_peer.py --pairs PAIRS.json --kernelbench DIR \
      [--device cuda:0 | --devices cuda:0,cuda:1] [--out results.json] [--timeout 300]
PAIRS.json: [{"id": ..., "task": "path/to/problem.py", "candidate": "path/to/cand.py"}, ...]
Trusted bench code: candidates run unsandboxed.
"""

import argparse
import itertools
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ERROR_KEYS = ("compilation_error", "runtime_error", "correctness_issue", "cuda_error",
              "other_error", "error", "error_during_performance")
TRIM = 500
_SEQ = itertools.count()  # names each child's request/result files


# ----------------------------------------------------------------------------
# Child: one candidate, one fresh interpreter.
# ----------------------------------------------------------------------------

def _install_stubs():
    """KernelBench's package imports, at module top level, some packages the
    GPU machine lacks (python-dotenv, openai, litellm, pydantic). The real one
    is used wherever it imports; otherwise a stand-in goes into sys.modules.
    Returns the names stood in for.
      dotenv   kernelbench/utils.py calls load_dotenv() at import, to read LLM
               API keys from .env; eval never reads them. Stand-in: no-op.
      openai, litellm   utils.py imports OpenAI and completion for
               query_server (LLM sampling), which eval never calls. Stand-ins
               raise if used.
      tqdm, requests   on the GPU machine already; stood in only if absent:
               tqdm serves utils' multiprocess helpers, requests is imported
               by eval.py and never used.
      pydantic NOT unused: eval.py's KernelExecResult is a pydantic BaseModel.
               The stand-in does what eval_kernel_against_ref asks of it:
               keyword construction, per-instance copies of the field
               defaults (as pydantic copies mutable defaults), shallow copies
               of dict/list arguments (as pydantic's validation makes), and
               attribute reads and writes. No type coercion: KernelBench
               passes values of the declared types.
    """
    import copy
    import importlib
    import types

    stubbed = []

    def need(name):
        try:
            importlib.import_module(name)
            return False
        except ImportError:
            stubbed.append(name)
            return True

    def unusable(what):
        def fail(*args, **kwargs):
            raise RuntimeError(f"{what} is a kernelbench_peer stand-in; eval never calls it")
        return fail

    if need("dotenv"):
        m = types.ModuleType("dotenv")
        m.load_dotenv = lambda *a, **k: False
        sys.modules["dotenv"] = m
    if need("openai"):
        m = types.ModuleType("openai")
        m.OpenAI = unusable("openai.OpenAI")
        sys.modules["openai"] = m
    if need("litellm"):
        m = types.ModuleType("litellm")
        m.completion = unusable("litellm.completion")
        sys.modules["litellm"] = m
    if need("tqdm"):
        m = types.ModuleType("tqdm")
        m.tqdm = unusable("tqdm.tqdm")
        sys.modules["tqdm"] = m
    if need("requests"):
        sys.modules["requests"] = types.ModuleType("requests")
    if need("pydantic"):
        missing = object()

        class BaseModel:
            def __init_subclass__(cls, **kwargs):
                super().__init_subclass__(**kwargs)
                fields = {}
                for klass in reversed(cls.__mro__):
                    for name in getattr(klass, "__annotations__", {}):
                        if not name.startswith("_"):
                            fields[name] = klass.__dict__.get(name, missing)
                cls._peer_fields = fields

            def __init__(self, **data):
                for name, default in self._peer_fields.items():
                    if name in data:
                        value = data[name]
                        if isinstance(value, (dict, list)):
                            value = type(value)(value)
                    elif default is missing:
                        raise TypeError(f"{type(self).__name__}: field {name} is required")
                    else:
                        value = copy.deepcopy(default)
                    setattr(self, name, value)

            def model_dump(self):
                return {name: getattr(self, name) for name in self._peer_fields}

            dict = model_dump

            def __repr__(self):
                body = " ".join(f"{k}={v!r}" for k, v in self.model_dump().items())
                return f"{type(self).__name__}({body})"

        m = types.ModuleType("pydantic")
        m.BaseModel = BaseModel
        sys.modules["pydantic"] = m
    return stubbed


def _trim(value, limit=TRIM):
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _error_of(metadata):
    for key in ERROR_KEYS:
        if key in metadata:
            name = metadata.get(key + "_name")
            return _trim(f"{name}: {metadata[key]}" if name else f"{key}: {metadata[key]}")
    return None


def child_main(request_path, result_path):
    t0 = time.perf_counter()
    req = json.load(open(request_path))
    out = {"compiled": False, "correctness": False, "runtime_ms": -1.0, "runtime_stats": {},
           "ref_runtime_ms": -1.0, "ref_runtime_stats": {}, "metadata": {}, "error": None}

    def write():
        out["child_total_s"] = round(time.perf_counter() - t0, 4)
        with open(result_path + ".tmp", "w") as f:
            json.dump(out, f, indent=1, default=str)
        os.replace(result_path + ".tmp", result_path)

    try:
        out["stubbed"] = _install_stubs()
        # This script's own folder (bench/) is no part of KernelBench's path.
        if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
            sys.path.pop(0)
        sys.path.insert(0, os.path.join(req["kernelbench"], "src"))
        import torch
        from kernelbench import eval as kb_eval
        out["versions"] = {"python": sys.version.split()[0], "torch": torch.__version__}
        try:
            import triton
            out["versions"]["triton"] = triton.__version__
        except ImportError:
            out["versions"]["triton"] = None
    except BaseException as e:  # report the import failure itself, cleanly
        out["error"] = _trim(f"importing KernelBench failed: {type(e).__name__}: {e}")
        write()
        return 0
    out["import_s"] = round(time.perf_counter() - t0, 4)

    t1 = time.perf_counter()
    try:
        ref_src = open(req["task"]).read()
        cand_src = open(req["candidate"]).read()
        device = torch.device(req["device"])
        result = kb_eval.eval_kernel_against_ref(
            original_model_src=ref_src,
            custom_model_src=cand_src,
            seed_num=42,
            num_correct_trials=req["num_correct_trials"],
            num_perf_trials=req["num_perf_trials"],
            measure_performance=req["measure_performance"],
            timing_method=req["timing_method"],
            verbose=req["verbose"],
            build_dir=None,  # only the CUDA backend builds; Triton loads from a temp file
            device=device,
            backend=req["backend"],
            precision=kb_eval.get_torch_dtype_from_string(req["precision"]),
            check_for_excessive_speedup=req["check_for_excessive_speedup"],
        )
        if result is None:  # KB: "Lock file error during compilation, Please retry"
            out["error"] = "eval_kernel_against_ref returned None (lock-file error; KB says retry)"
        else:
            metadata = kb_eval.check_metadata_serializable_all_types(result.metadata)
            out.update(compiled=result.compiled, correctness=result.correctness,
                       runtime_ms=result.runtime, runtime_stats=result.runtime_stats,
                       ref_runtime_ms=result.ref_runtime, ref_runtime_stats=result.ref_runtime_stats,
                       metadata={k: _trim(v, 2000) if isinstance(v, str) else v
                                 for k, v in metadata.items()})
            out["error"] = _error_of(metadata)
    except Exception as e:
        # KernelBench's scripts' "last level catch": anything raised counts as
        # compiled=False (cuda_error when the message says "CUDA error").
        key = "cuda_error" if "CUDA error" in str(e) else "other_error"
        out.update(compiled=False, correctness=False,
                   metadata={key: _trim(e, 2000), key + "_name": kb_eval.get_error_name(e)})
        out["error"] = _trim(f"{kb_eval.get_error_name(e)}: {e}")
    out["eval_s"] = round(time.perf_counter() - t1, 4)
    write()
    return 0


# ----------------------------------------------------------------------------
# Parent: schedule children over GPUs, time them, summarize.
# ----------------------------------------------------------------------------

def run_one(pair, device, args, workdir, triton_cache):
    tag = next(_SEQ)
    req_path = os.path.join(workdir, f"req-{tag}.json")
    res_path = os.path.join(workdir, f"res-{tag}.json")
    safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(pair["id"]))
    log_path = os.path.join(args.keep_logs or workdir, f"{tag:04d}-{safe_id}.log")
    with open(req_path, "w") as f:
        json.dump({"kernelbench": args.kernelbench, "task": pair["task"],
                   "candidate": pair["candidate"], "device": device,
                   "num_correct_trials": args.num_correct_trials,
                   "num_perf_trials": args.num_perf_trials,
                   "measure_performance": not args.no_perf,
                   "timing_method": args.timing_method, "backend": args.backend,
                   "precision": args.precision, "verbose": args.verbose,
                   "check_for_excessive_speedup": not args.no_excessive_speedup_check}, f)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if triton_cache:
        env["TRITON_CACHE_DIR"] = triton_cache
    record = {"id": pair["id"], "device": device, "timed_out": False}
    with open(log_path, "w") as log:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", req_path, res_path],
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: only what it started
            rc = proc.wait()
            record["timed_out"] = True
        record["wall_s"] = round(time.perf_counter() - start, 4)
    record["exit_code"] = rc
    if os.path.exists(res_path):
        record.update(json.load(open(res_path)))
    else:
        record.update(compiled=False, correctness=False, runtime_ms=-1.0, runtime_stats={})
        with open(log_path, errors="replace") as f:
            tail = f.read()[-TRIM:]
        why = f"timed out after {args.timeout} s" if record["timed_out"] else f"child exited {rc} with no result"
        record["error"] = _trim(f"{why}; log tail: {tail}", 2 * TRIM)
    return record


def p90(values):
    ordered = sorted(values)
    return ordered[max(0, -(-9 * len(ordered) // 10) - 1)] if ordered else None


def summarize(records, batch_wall, devices):
    correct = [r for r in records if r["correctness"]]
    walls = [r["wall_s"] for r in correct]
    return {
        "candidates": len(records), "compiled": sum(bool(r["compiled"]) for r in records),
        "correct": len(correct), "timed_out": sum(r["timed_out"] for r in records),
        "devices": len(devices), "batch_wall_s": round(batch_wall, 3),
        "candidates_per_s": round(len(records) / batch_wall, 4) if batch_wall > 0 else None,
        "median_wall_s_correct": round(statistics.median(walls), 3) if walls else None,
        "p90_wall_s_correct": round(p90(walls), 3) if walls else None,
        "median_wall_s_all": round(statistics.median(r["wall_s"] for r in records), 3) if records else None,
    }


def print_table(records, summary):
    print(f"{'id':<28} {'dev':<7} {'comp':<5} {'corr':<5} {'ms':>9} {'wall s':>8}  error")
    for r in records:
        err = (r.get("error") or "").replace("\n", " ")[:60]
        print(f"{str(r['id'])[:28]:<28} {r['device']:<7} {str(bool(r['compiled'])):<5} "
              f"{str(bool(r['correctness'])):<5} {r.get('runtime_ms', -1):>9.4g} {r['wall_s']:>8.2f}  {err}")
    print()
    print("KernelBench eval_kernel_against_ref, a fresh process per candidate")
    for key, value in summary.items():
        print(f"  {key:<24} {value}")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", required=True, help='JSON list of {"id", "task", "candidate"}')
    p.add_argument("--kernelbench", required=True, help="KernelBench tree (scripts/fetch-kernelbench.sh)")
    p.add_argument("--device", default="cuda:0", help="GPU for all candidates (default cuda:0)")
    p.add_argument("--devices", help="comma list, one candidate process per device at a time (overrides --device)")
    p.add_argument("--out", default="kernelbench_peer_results.json")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per candidate process (default 300)")
    p.add_argument("--num-correct-trials", type=int, default=5, help="KB scripts' default 5")
    p.add_argument("--num-perf-trials", type=int, default=100, help="KB scripts' default 100")
    p.add_argument("--no-perf", action="store_true", help="measure_performance=False (KB scripts: True)")
    p.add_argument("--no-excessive-speedup-check", action="store_true",
                   help="skip KB's reference timing (its default times the reference too)")
    p.add_argument("--timing-method", default="cuda_event", help="KB default cuda_event")
    p.add_argument("--backend", default="triton")
    p.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--lockstep", action="store_true",
                   help="batches of len(devices) waited for as a whole, as eval_from_generations.py")
    p.add_argument("--triton-cache", default="fresh",
                   help="'fresh' (default): a new TRITON_CACHE_DIR for this run; 'inherit'; or a folder")
    p.add_argument("--keep-logs", help="folder for each child's output (default: discarded)")
    p.add_argument("--verbose", action="store_true", help="KB verbose=True in the children")
    p.add_argument("--deadline", type=float, default=0.0,
                   help="start no candidate after this many seconds (0: none); for runs that "
                        "must end inside a time budget")
    return p.parse_args()


def load_pairs(path):
    pairs = json.load(open(path))
    if not isinstance(pairs, list):
        sys.exit(f"{path}: expected a JSON list of pairs")
    base = os.path.dirname(os.path.abspath(path))
    seen = set()
    for pair in pairs:
        for key in ("id", "task", "candidate"):
            if key not in pair:
                sys.exit(f"{path}: pair {pair!r} lacks {key!r}")
        if pair["id"] in seen:
            sys.exit(f"{path}: id {pair['id']!r} appears twice")
        seen.add(pair["id"])
        for key in ("task", "candidate"):  # relative paths: to the pairs file
            pair[key] = os.path.join(base, pair[key])
            if not os.path.isfile(pair[key]):
                sys.exit(f"{path}: {pair['id']}: {key} {pair[key]} does not exist")
    return pairs


def main():
    args = parse_args()
    args.kernelbench = os.path.abspath(args.kernelbench)
    if not os.path.isfile(os.path.join(args.kernelbench, "src", "kernelbench", "eval.py")):
        sys.exit(f"{args.kernelbench}: no src/kernelbench/eval.py (run scripts/fetch-kernelbench.sh)")
    pairs = load_pairs(args.pairs)
    devices = [d.strip() for d in (args.devices or args.device).split(",") if d.strip()]
    if args.keep_logs:
        os.makedirs(args.keep_logs, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="kb-peer-")
    triton_cache = {"fresh": os.path.join(workdir, "triton-cache"), "inherit": None}.get(
        args.triton_cache, args.triton_cache)
    stamp = os.path.join(args.kernelbench, ".kforge-kernelbench-commit")
    meta = {"kernelbench_commit": open(stamp).read().strip() if os.path.exists(stamp) else None,
            "python": sys.executable, "devices": devices, "lockstep": args.lockstep,
            "triton_cache": args.triton_cache, "timeout_s": args.timeout,
            "eval_args": {"backend": args.backend, "precision": args.precision,
                          "num_correct_trials": args.num_correct_trials,
                          "num_perf_trials": args.num_perf_trials,
                          "measure_performance": not args.no_perf,
                          "timing_method": args.timing_method,
                          "check_for_excessive_speedup": not args.no_excessive_speedup_check}}
    records, lock = [], threading.Lock()

    def finish(record):
        with lock:
            records.append(record)
            print(f"[{len(records)}/{len(pairs)}] {record['id']} on {record['device']}: "
                  f"compiled={record['compiled']} correct={record['correctness']} "
                  f"wall={record['wall_s']:.2f}s" + (f" error={record['error'][:100]!r}" if record.get("error") else ""),
                  flush=True)

    def worker(device, todo):
        while True:
            if args.deadline and time.perf_counter() - start > args.deadline:
                return  # what is left is not run; the summary counts what ran
            try:
                pair = todo.get_nowait()
            except queue.Empty:
                return
            finish(run_one(pair, device, args, workdir, triton_cache))

    def run_threads(threads):
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    start = time.perf_counter()
    try:
        if args.lockstep:  # batch i: pairs[k*i + j] on devices[j], all waited for
            for first in range(0, len(pairs), len(devices)):
                run_threads([threading.Thread(
                    target=lambda p, d: finish(run_one(p, d, args, workdir, triton_cache)),
                    args=(p, d), name=f"peer-{d}") for p, d in zip(pairs[first:], devices)])
        else:
            todo = queue.Queue()
            for pair in pairs:
                todo.put(pair)
            run_threads([threading.Thread(target=worker, args=(d, todo), name=f"peer-{d}")
                         for d in devices])
    finally:
        batch_wall = time.perf_counter() - start
        shutil.rmtree(workdir, ignore_errors=True)
    order = {p["id"]: i for i, p in enumerate(pairs)}
    records.sort(key=lambda r: order[r["id"]])
    summary = summarize(records, batch_wall, devices)
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "summary": summary, "records": records}, f, indent=1, default=str)
    print_table(records, summary)
    print(f"  {'results':<24} {args.out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        sys.exit(child_main(sys.argv[2], sys.argv[3]))
    sys.exit(main())
