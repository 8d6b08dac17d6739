// The reference server's answer for one input set, and the comparison of a
// candidate's reply against it. The comparison runs here, in the verifier,
// on raw bytes: candidate code cannot reach or patch it.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_SET_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_SET_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/verdict.pb.h"
#include "kforge/v1/verifier_options.pb.h"
#include "verifier_worker/funnel/input_plan.h"
#include "verifier_worker/funnel/tensor_compare.h"
#include "verifier_worker/sandbox/frame.h"

namespace kforge {

struct ReferenceSet {
  InputSetSpec spec;
  bool ok = false;
  std::string message;  // why the reference could not run this set
  // Below 1 when the set was scaled down to fit max_set_bytes; the name in
  // the verdict then reads "task_inputs@0.25".
  double fit_scale = 1.0;
  std::string DisplayName() const;
  google::protobuf::Value init_inputs;
  // The tensor inputs, with their positions among all inputs; plain-number
  // inputs (a scale factor) travel in `scalars`, a list of [position, value].
  std::vector<TensorEntry> inputs;
  std::vector<int> input_positions;
  google::protobuf::Value scalars;
  std::vector<TensorEntry> outputs;
  // The tensor inputs again, in a sealed buffer each candidate of the epoch
  // maps instead of receiving a copy (null where one could not be made:
  // the inputs then travel in the request); input i at shared_offsets[i].
  std::shared_ptr<const SharedMemory> shared_inputs;
  std::vector<uint64_t> shared_offsets;
};

// Puts the set's tensor inputs into a sealed shared buffer (shared_inputs).
absl::Status ShareInputs(const Frame& prepared, ReferenceSet& set);

// The bytes a candidate's reply to a request on `set` carries: `runs`
// output lists and, with `with_inputs`, the inputs as they are after.
uint64_t ReplyBytes(const ReferenceSet& set, int runs, bool with_inputs);

// Splits a "prepared" frame into its sets (in plan order). The frame owns
// the bytes; keep it alive as long as the sets.
absl::StatusOr<std::map<std::string, ReferenceSet>> ParsePrepared(
    const Frame& prepared, const std::vector<InputSetSpec>& specs);

// Adds the set's inputs to `request`: tensors under "<set>/in<i>" (in the
// header's "shared_tensors", in the attached shared buffer, where the set
// has one; else in the payload), plain numbers under the header's
// "scalars" (by set name).
void AttachInputs(const ReferenceSet& set, const Frame& prepared, Frame& request);

struct SetCheck {
  kforge::v1::InputSetResult result;
  std::vector<std::pair<kforge::v1::HackFlag, std::string>> flags;
};

// Compares the candidate's "run<r>/out<i>" outputs with the reference and,
// with `check_inputs`, "after/in<i>" with the inputs as sent; `runs` > 1
// also checks the runs agree with each other.
SetCheck CheckCandidateOutputs(const ReferenceSet& set, const Frame& prepared, const Frame& reply,
                               int runs, bool check_inputs,
                               const kforge::v1::Tolerances& tolerances);

// The tolerance outputs of `dtype` ("float32", ...) are compared with:
// integers and booleans exactly.
Tolerance ToleranceFor(const std::string& dtype, const kforge::v1::Tolerances& tolerances);

// Compares one output list ("<prefix><i>") of a reply with the set's
// reference outputs; used to re-check timed runs.
SetCheck CheckOutputsOnly(const ReferenceSet& set, const Frame& prepared, const Frame& reply,
                          const std::string& prefix, const kforge::v1::Tolerances& tolerances);

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_SET_H_
