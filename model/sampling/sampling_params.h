// Per-sequence sampling parameters as the sampler consumes them, their
// validation, and the seeding contract that makes a rollout reproducible.
//
// A sequence's randomness is a pure function of (seed, step): the uniform
// that picks its token at completion position `step` is SamplingUniform(seed,
// step), whatever else shares the batch. The seed of a sample comes from the
// job's base seed and the sample id (DeriveSampleSeed), so re-issuing a group
// under the same policy version reproduces its completions token for token.
//
//   KF_ASSIGN_OR_RETURN(RowSamplingParams params,
//                       RowSamplingParamsFromProto(item.sampling(), sample_id));
//   ... sampler.Sample(logits, {&params, 1}, {&step, 1}) ...
//
// No LibTorch here: the learner and the CLI check parameters without it.
#ifndef KFORGE_MODEL_SAMPLING_SAMPLING_PARAMS_H_
#define KFORGE_MODEL_SAMPLING_SAMPLING_PARAMS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kforge/v1/job.pb.h"

namespace kforge {

// What the sampler needs of one sequence. The member initialisers are the
// neutral values (plain softmax sampling at temperature 1), not the job
// defaults: those live in the `(kforge.v1.field)` annotations of
// kforge.v1.SamplingParams and arrive through RowSamplingParamsFromProto.
struct RowSamplingParams {
  // Logits are divided by it before the softmax. 0 means greedy (argmax).
  double temperature = 1.0;
  // Nucleus: keep the smallest set of most likely tokens whose probability
  // mass is >= top_p (at least one token). 1 keeps every token.
  double top_p = 1.0;
  // Keep only the top_k most likely tokens; 0 disables the limit.
  int32_t top_k = 0;
  // Per-sequence seed (see DeriveSampleSeed).
  uint64_t seed = 0;
};

// INVALID_ARGUMENT naming the field and its value when the parameters do not
// define a distribution: temperature negative or not finite, top_p outside
// (0, 1] or NaN, top_k negative. `name` prefixes the field ("rows[3]" gives
// "rows[3].top_p: 1.5 is outside (0, 1]"). The proto's tighter ranges (for
// example temperature <= 10) are checked where jobs enter the system.
absl::Status ValidateSamplingParams(const RowSamplingParams& params,
                                    absl::string_view name = "sampling");

// The job-level proto for one sample: unset fields take the proto's
// annotated defaults (an unset temperature is 1, not 0), the result is
// validated, and the seed is DeriveSampleSeed(proto.seed(), sample_id).
absl::StatusOr<RowSamplingParams> RowSamplingParamsFromProto(
    const v1::SamplingParams& proto, absl::string_view sample_id);

// A sample's seed from the job's base seed and the sample id. Stable across
// processes, builds and platforms (FNV-1a and SplitMix64, not absl::Hash,
// which is salted per process).
uint64_t DeriveSampleSeed(uint64_t base_seed, absl::string_view sample_id);

// The uniform in [0, 1 - 2^-52] that chooses the token of a sequence with
// `seed` at completion position `step` (0 for the first generated token).
// Changing this function changes every reproduced rollout.
double SamplingUniform(uint64_t seed, uint64_t step);

}  // namespace kforge

#endif  // KFORGE_MODEL_SAMPLING_SAMPLING_PARAMS_H_
