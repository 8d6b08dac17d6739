"""Times a candidate with triton.testing.do_bench on the same inputs the
verifier's "task_inputs" set uses (same size budget, seed 42), for the
timing-agreement line of bench/verifier_bench. Trusted bench code: it runs
the candidate unsandboxed, so only run it on our own candidates.

usage: python3 do_bench_reference.py HARNESS_DIR TASK.py CANDIDATE.py DEVICE MAX_SET_BYTES
prints: <candidate median ms> <eager median ms>
"""

import sys
import types

harness_dir, task_file, candidate_file, device, max_bytes = sys.argv[1:6]
sys.path.insert(0, harness_dir)

import torch  # noqa: E402
import triton.testing  # noqa: E402

from kforge_harness import task_inputs  # noqa: E402

task = task_inputs.load_task(open(task_file).read())
spec = task_inputs.fit_to_budget(task, {"name": "task_inputs", "seed": 42}, int(max_bytes))
init_inputs, inputs, _ = task_inputs.make_inputs(task, spec)
inputs = [x.to(device) for x in inputs]
module = types.ModuleType("candidate")
exec(compile(open(candidate_file).read(), candidate_file, "exec"), module.__dict__)
torch.manual_seed(7)
candidate = module.ModelNew(*init_inputs).to(device)
torch.manual_seed(7)
reference = task.Model(*init_inputs).to(device)
with torch.no_grad():
    cand_ms = triton.testing.do_bench(lambda: candidate(*inputs), warmup=100, rep=500, return_mode="median")
    eager_ms = triton.testing.do_bench(lambda: reference(*inputs), warmup=100, rep=500, return_mode="median")
print(cand_ms, eager_ms)
