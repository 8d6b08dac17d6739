// BuildInputPlan: which input sets an epoch makes, and how large each may
// be. The task's own inputs, the timing's pool, the larger set and the fresh
// probes keep the full budget; every other set that only varies shapes,
// dtype or values past the pool is made at variant_set_bytes.
#include "verifier_worker/funnel/input_plan.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace kforge {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

kforge::v1::MultiInputOptions Options(int64_t max_set, int64_t variant) {
  kforge::v1::MultiInputOptions options;
  options.set_other_distributions(true);
  options.set_scaled_values(true);
  options.set_value_scale(100);
  options.set_secret_seeds(2);
  options.set_ragged_shapes(true);
  options.set_larger_shapes(true);
  options.set_larger_scale(1.5);
  options.set_batch_one(true);
  options.set_other_dtype(true);
  options.set_tiny_scale(0.125);
  options.set_max_set_bytes(max_set);
  options.set_variant_set_bytes(variant);
  return options;
}

std::map<std::string, int64_t> Budgets(const InputPlan& plan) {
  std::map<std::string, int64_t> out;
  for (const InputSetSpec& spec : plan.All()) out[spec.name] = spec.max_bytes;
  return out;
}

TEST(InputPlanTest, OnlyTheTimedSetsKeepTheFullBudget) {
  absl::BitGen rng;
  const InputPlan plan = BuildInputPlan(Options(256 * kMiB, 64 * kMiB), "bfloat16",
                                        /*fresh_sets=*/2, /*full_size_sets=*/4, rng);
  const std::map<std::string, int64_t> budgets = Budgets(plan);
  ASSERT_EQ(plan.sets.front().name, "task_inputs");
  for (const char* full : {"task_inputs", "normal", "uniform", "heavy_tailed", "larger_x1.5",
                           "fresh_1", "fresh_2"}) {
    EXPECT_EQ(budgets.at(full), 0) << full;
  }
  for (const char* variant : {"tiny", "scaled_x100", "secret_seed_1", "secret_seed_2",
                              "ragged_shape", "batch_1", "bfloat16"}) {
    EXPECT_EQ(budgets.at(variant), 64 * kMiB) << variant;
  }
  // A value set scaled down is not timed on, and the reference server does
  // not keep it on the device for the baselines.
  for (const InputSetSpec& spec : plan.sets) {
    const bool kept = spec.ToValue().struct_value().fields().at("same_shape").bool_value();
    EXPECT_EQ(kept, spec.same_shape && spec.max_bytes == 0) << spec.name;
  }
}

TEST(InputPlanTest, TheTasksOwnInputsKeepTheFullBudgetWithoutATimingPool) {
  absl::BitGen rng;
  const std::map<std::string, int64_t> budgets = Budgets(
      BuildInputPlan(Options(256 * kMiB, 64 * kMiB), "", /*fresh_sets=*/0, /*full_size_sets=*/0,
                     rng));
  EXPECT_EQ(budgets.at("task_inputs"), 0);
  EXPECT_EQ(budgets.at("normal"), 64 * kMiB);
  EXPECT_EQ(budgets.count("bfloat16"), 0u) << "no other dtype asked for";
}

TEST(InputPlanTest, AVariantBudgetNotBelowTheFullOneChangesNothing) {
  absl::BitGen rng;
  for (const auto& [name, budget] :
       Budgets(BuildInputPlan(Options(64 * kMiB, 256 * kMiB), "bfloat16", 2, 4, rng))) {
    EXPECT_EQ(budget, 0) << name;
  }
}

}  // namespace
}  // namespace kforge
