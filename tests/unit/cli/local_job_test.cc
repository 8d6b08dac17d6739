// The default `kforge local` job and its short version: valid against the
// JobSpec's annotations, the recipe that makes learning visible on two
// cores (bench/local_learning.py measures it), the seed, and CI's short job.
#include "cli/local_job.h"

#include <gtest/gtest.h>

#include "common/config/proto_defaults.h"
#include "common/config/proto_validation.h"

namespace kforge {
namespace {

v1::JobSpec Checked(v1::JobSpec spec) {
  EXPECT_TRUE(ApplyProtoDefaults(&spec).ok());
  const absl::Status valid = ValidateProtoFields(spec, "spec");
  EXPECT_TRUE(valid.ok()) << valid;
  return spec;
}

TEST(DefaultLocalJob, IsAValidJobSpecOnCpuAndGpu) {
  for (bool gpu : {false, true}) {
    const v1::JobSpec spec = Checked(DefaultLocalJob("/models/tiny", gpu));
    EXPECT_EQ(spec.model_path(), "/models/tiny");
    EXPECT_EQ(spec.tasks().solutions_dir(), gpu ? "solutions" : "solutions-torch");
    EXPECT_EQ(spec.verifier().require_triton(), gpu);
  }
}

TEST(DefaultLocalJob, WarmStartsThenRunsGrpoWithDrGrpoAdvantagesAtHalfTheWarmStartsRate) {
  const v1::JobSpec spec = Checked(DefaultLocalJob("/m", false));
  EXPECT_EQ(spec.algorithm(), v1::ALGORITHM_GRPO);
  EXPECT_GT(spec.warm_start_steps(), 0);
  EXPECT_FALSE(spec.grpo().scale_by_std());
  EXPECT_EQ(spec.grpo().kl_coef(), 0);
  // One schedule, the warm start at twice GRPO's rate; GRPO's small
  // gradients meet the warm start's AdamW moments (local_job.cc says why).
  EXPECT_DOUBLE_EQ(spec.sft().learning_rate(), 1e-2);
  EXPECT_DOUBLE_EQ(spec.optimizer().learning_rate(), 5e-3);
}

TEST(DefaultLocalJob, CpuRewardLeavesHostTimingOutAndKeepsTheStageCredits) {
  const v1::JobSpec spec = Checked(DefaultLocalJob("/m", false));
  EXPECT_FALSE(spec.verifier().timing().enabled());
  EXPECT_EQ(spec.reward().speedup_weight(), 0);
  // Not an easier reward: the stage credits are the RewardSpec defaults.
  v1::RewardSpec defaults;
  ASSERT_TRUE(ApplyProtoDefaults(&defaults).ok());
  EXPECT_EQ(spec.reward().fail_compile(), defaults.fail_compile());
  EXPECT_EQ(spec.reward().fail_tiny_run(), defaults.fail_tiny_run());
  EXPECT_EQ(spec.reward().fail_multi_input(), defaults.fail_multi_input());
  EXPECT_EQ(spec.reward().correct(), defaults.correct());
  EXPECT_EQ(spec.reward().format_weight(), defaults.format_weight());
}

TEST(DefaultLocalJob, SeedSetsTheJobAndSamplingSeeds) {
  const v1::JobSpec spec = DefaultLocalJob("/m", false, 7);
  EXPECT_EQ(spec.seed(), 7u);
  EXPECT_EQ(spec.sampling().seed(), 7u);
  EXPECT_EQ(ShortLocalJob("/m", false, 7).seed(), 7u);
}

// The recipe was tuned with the next step's groups sampled while a step
// trains and none while it collects: lookahead stays off.
TEST(DefaultLocalJob, SamplesTheNextStepWhileTrainingWithoutLookahead) {
  for (bool gpu : {false, true}) {
    const v1::JobSpec spec = Checked(DefaultLocalJob("/m", gpu));
    EXPECT_EQ(spec.max_staleness(), 1);
    EXPECT_EQ(spec.lookahead_steps(), 0);
    EXPECT_EQ(Checked(ShortLocalJob("/m", gpu)).lookahead_steps(), 0);
  }
}

TEST(ShortLocalJob, KeepsTheWarmStartAndCutsGrpoToTenSteps) {
  const v1::JobSpec full = Checked(DefaultLocalJob("/m", false));
  const v1::JobSpec spec = Checked(ShortLocalJob("/m", false));
  EXPECT_EQ(spec.warm_start_steps(), full.warm_start_steps());
  EXPECT_EQ(spec.total_steps(), 10);
  EXPECT_LE(spec.prompts_per_step() * spec.grpo().group_size(),
            full.prompts_per_step() * full.grpo().group_size());
}

}  // namespace
}  // namespace kforge
