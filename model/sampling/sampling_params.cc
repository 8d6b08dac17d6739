#include "model/sampling/sampling_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/config/proto_defaults.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

// SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijection on 64-bit
// words with full avalanche, so nearby seeds and steps give unrelated bits.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

absl::Status ValidateSamplingParams(const RowSamplingParams& params, absl::string_view name) {
  if (!std::isfinite(params.temperature) || params.temperature < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".temperature: ", params.temperature,
                     " is not a finite number >= 0 (0 means greedy)"));
  }
  // Written so that NaN fails too.
  if (!(params.top_p > 0 && params.top_p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".top_p: ", params.top_p, " is outside (0, 1]"));
  }
  if (params.top_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ".top_k: ", params.top_k, " is negative (0 disables top-k)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RowSamplingParams> RowSamplingParamsFromProto(const v1::SamplingParams& proto,
                                                             absl::string_view sample_id) {
  // Proto3 reads an unset optional double as 0, which would silently mean
  // greedy; the annotated defaults are the contract.
  v1::SamplingParams effective = proto;
  KF_RETURN_IF_ERROR(ApplyProtoDefaults(&effective));
  RowSamplingParams params;
  params.temperature = effective.temperature();
  params.top_p = effective.top_p();
  params.top_k = effective.top_k();
  params.seed = DeriveSampleSeed(effective.seed(), sample_id);
  KF_RETURN_IF_ERROR(ValidateSamplingParams(params, "sampling"));
  return params;
}

uint64_t DeriveSampleSeed(uint64_t base_seed, absl::string_view sample_id) {
  return SplitMix64(SplitMix64(base_seed) ^ Fnv1a64(sample_id));
}

double SamplingUniform(uint64_t seed, uint64_t step) {
  const uint64_t bits = SplitMix64(SplitMix64(seed) ^ step);
  // The top 52 bits: multiples of 2^-52 in [0, 1 - 2^-52]. The sampler relies
  // on u <= 1 - 2^-52 so that u * total stays strictly below total.
  return static_cast<double>(bits >> 12) * 0x1.0p-52;
}

}  // namespace kforge
