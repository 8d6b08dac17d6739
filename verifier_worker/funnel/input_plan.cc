#include "verifier_worker/funnel/input_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kforge {

google::protobuf::Value InputSetSpec::ToValue() const {
  google::protobuf::Value value;
  auto& f = *value.mutable_struct_value()->mutable_fields();
  f["name"].set_string_value(name);
  f["seed"].set_number_value(static_cast<double>(seed));
  f["distribution"].set_string_value(distribution);
  f["value_scale"].set_number_value(value_scale);
  f["size_scale"].set_number_value(size_scale);
  f["ragged"].set_bool_value(ragged);
  f["batch_one"].set_bool_value(batch_one);
  f["dtype"].set_string_value(dtype);
  // The reference server keeps these on the device: the baselines are
  // timed on them.
  f["same_shape"].set_bool_value(same_shape && !probe && max_bytes == 0);
  if (max_bytes > 0) f["max_bytes"].set_number_value(static_cast<double>(max_bytes));
  // Value-changing sets must keep the reference finite, or they test nothing.
  f["require_finite"].set_bool_value(name != "task_inputs");
  return value;
}

std::vector<InputSetSpec> InputPlan::All() const {
  std::vector<InputSetSpec> all = {tiny};
  all.insert(all.end(), sets.begin(), sets.end());
  all.insert(all.end(), fresh.begin(), fresh.end());
  return all;
}

InputPlan BuildInputPlan(const kforge::v1::MultiInputOptions& options,
                         const std::string& alt_dtype, int fresh_sets, int full_size_sets,
                         absl::BitGen& rng) {
  // Seeds below 2^31 so every consumer (torch, numpy) takes them as is.
  auto secret = [&] { return absl::Uniform<uint64_t>(rng, 1, uint64_t{1} << 31); };
  InputPlan plan;
  plan.tiny = {.name = "tiny", .seed = secret(), .size_scale = options.tiny_scale()};
  plan.sets.push_back({.name = "task_inputs", .seed = options.task_seed(), .same_shape = true});
  if (options.other_distributions()) {
    for (const char* distribution : {"normal", "uniform", "heavy_tailed"}) {
      plan.sets.push_back({.name = distribution, .seed = secret(), .distribution = distribution,
                           .same_shape = true});
    }
  }
  if (options.scaled_values()) {
    plan.sets.push_back({.name = absl::StrCat("scaled_x", options.value_scale()), .seed = secret(),
                         .value_scale = options.value_scale(), .same_shape = true});
  }
  for (int i = 0; i < options.secret_seeds(); ++i) {
    plan.sets.push_back({.name = absl::StrCat("secret_seed_", i + 1), .seed = secret(),
                         .same_shape = true});
  }
  if (options.ragged_shapes()) {
    plan.sets.push_back({.name = "ragged_shape", .seed = secret(), .ragged = true});
  }
  if (options.larger_shapes()) {
    plan.sets.push_back({.name = absl::StrCat("larger_x", options.larger_scale()),
                         .seed = secret(), .size_scale = options.larger_scale()});
  }
  if (options.batch_one()) {
    plan.sets.push_back({.name = "batch_1", .seed = secret(), .batch_one = true});
  }
  if (options.other_dtype() && !alt_dtype.empty()) {
    plan.sets.push_back({.name = alt_dtype, .seed = secret(), .dtype = alt_dtype});
  }
  const int64_t variant_bytes =
      options.variant_set_bytes() < options.max_set_bytes() ? options.variant_set_bytes() : 0;
  if (variant_bytes > 0) {
    plan.tiny.max_bytes = variant_bytes;
    int full = 0;
    for (InputSetSpec& spec : plan.sets) {
      if (spec.same_shape && full < std::max(1, full_size_sets)) {
        ++full;  // task_inputs is first
      } else if (spec.size_scale <= 1.0) {
        // The larger set keeps the full budget: beyond the task's sizes is
        // where index arithmetic overflows.
        spec.max_bytes = variant_bytes;
      }
    }
  }
  for (int i = 0; i < fresh_sets; ++i) {
    plan.fresh.push_back({.name = absl::StrCat("fresh_", i + 1), .seed = secret(),
                          .same_shape = true, .probe = true});
  }
  return plan;
}

}  // namespace kforge
