// Which input sets a verification uses, from the job's MultiInputOptions:
// a tiny set for stage 3, then the task's own inputs, other distributions,
// scaled values, secret seeds, ragged, larger and batch-1 shapes and another
// dtype for stage 4, and fresh same-shape sets that only the timing stage
// uses (TimingProtocol.fresh_input_probes). Secret seeds come from `rng`,
// fresh per reference epoch (ReferenceCache), so a candidate cannot
// precompute answers for known seeds.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_INPUT_PLAN_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_INPUT_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "kforge/v1/verifier_options.pb.h"
#include "verifier_worker/sandbox/frame.h"

namespace kforge {

struct InputSetSpec {
  std::string name;
  uint64_t seed = 0;
  std::string distribution = "task";  // task, normal, uniform, heavy_tailed
  double value_scale = 1.0;
  double size_scale = 1.0;
  bool ragged = false;
  bool batch_one = false;
  std::string dtype;  // "" keeps the task's dtype
  // Varies values only: the task's shapes and dtype, usable for timing
  // unless max_bytes scales it down.
  bool same_shape = false;
  // The set's budget (inputs and outputs) where smaller than the options'
  // max_set_bytes; 0: max_set_bytes.
  int64_t max_bytes = 0;
  // A fresh-input probe set: timed once per candidate, never kept on the
  // reference server's device.
  bool probe = false;

  google::protobuf::Value ToValue() const;
};

struct InputPlan {
  InputSetSpec tiny;
  std::vector<InputSetSpec> sets;   // stage 4, "task_inputs" first
  std::vector<InputSetSpec> fresh;  // timing's never-seen inputs, "fresh_1", ...

  // tiny, sets, fresh: everything the reference server prepares.
  std::vector<InputSetSpec> All() const;
};

// `alt_dtype` is the dtype of the other-dtype set ("bfloat16" on GPU,
// "" to leave it out). The first `full_size_sets` value-only sets (the
// task's own inputs first: the timing's pool), the larger set and the fresh
// sets keep max_set_bytes; every other set gets variant_set_bytes.
InputPlan BuildInputPlan(const kforge::v1::MultiInputOptions& options,
                         const std::string& alt_dtype, int fresh_sets, int full_size_sets,
                         absl::BitGen& rng);

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_INPUT_PLAN_H_
