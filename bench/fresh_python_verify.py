"""The baseline for bench/verifier_bench: one fresh Python process per
candidate doing the same checks as the funnel's stages 1-4 (static checks,
the same number of input sets from fresh seeds, reference outputs, the
candidate's outputs, comparisons), the way per-candidate evaluation scripts
(KernelBench's eval_kernel_against_ref) work. Prints "correct" or the
failure and exits 0; the bench only counts completions.

usage: python3 fresh_python_verify.py HARNESS_DIR TASK.py CANDIDATE.py DEVICE SETS
"""

import sys
import types

harness_dir, task_file, candidate_file, device, set_count = sys.argv[1:6]
sys.path.insert(0, harness_dir)

import torch  # noqa: E402

from kforge_harness import static_check, task_inputs  # noqa: E402

source = open(candidate_file).read()
result = static_check.check_source(source, device.startswith("cuda"))
if not result["ok"]:
    print("static:", result["findings"][0]["message"])
    sys.exit(0)
task = task_inputs.load_task(open(task_file).read())
module = types.ModuleType("candidate")
try:
    exec(compile(source, candidate_file, "exec"), module.__dict__)
    for i in range(int(set_count)):
        spec = {"name": f"s{i}", "seed": 1000 + i, "distribution": "normal" if i % 2 else "task"}
        init_inputs, inputs, _ = task_inputs.make_inputs(task, spec)
        inputs = [x.to(device) for x in inputs]
        torch.manual_seed(7)
        ref = task.Model(*init_inputs).to(device)(*inputs)
        torch.manual_seed(7)
        out = module.ModelNew(*init_inputs).to(device)(*inputs)
        if not torch.allclose(out, ref, atol=1e-4, rtol=1e-4):
            print("mismatch on set", i)
            sys.exit(0)
    print("correct")
except Exception as e:
    print("failed:", type(e).__name__, e)
