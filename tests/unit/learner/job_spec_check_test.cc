#include "learner/jobs/job_spec_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

class JobSpecCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteCheckpointSkeleton(dir_.Sub("model"));
    testing::WriteTaskFolder(dir_.Sub("tasks"));
  }
  v1::JobSpec Valid() { return testing::ValidJobSpec(dir_.Sub("model"), dir_.Sub("tasks")); }
  std::string Error(v1::JobSpec spec) {
    return std::string(CheckJobSpec({}, &spec).message());
  }
  testing::TempDir dir_;
};

TEST_F(JobSpecCheckTest, ValidSpecPassesWithDefaultsFilled) {
  v1::JobSpec spec = Valid();
  ASSERT_TRUE(CheckJobSpec({}, &spec).ok());
  EXPECT_EQ(spec.grpo().group_size(), 8);
  EXPECT_EQ(spec.total_steps(), 10);
}

TEST_F(JobSpecCheckTest, MissingModelPath) {
  v1::JobSpec spec = Valid();
  spec.clear_model_path();
  EXPECT_THAT(Error(spec), HasSubstr("spec.model_path: is required"));
}

TEST_F(JobSpecCheckTest, ModelPathThatDoesNotExist) {
  v1::JobSpec spec = Valid();
  spec.set_model_path("/nonexistent/model");
  EXPECT_THAT(Error(spec), HasSubstr("spec.model_path: /nonexistent/model: not a directory"));
}

TEST_F(JobSpecCheckTest, UnsupportedArchitecture) {
  testing::WriteCheckpointSkeleton(dir_.Sub("gpt2"), "GPT2LMHeadModel");
  v1::JobSpec spec = Valid();
  spec.set_model_path(dir_.Sub("gpt2"));
  EXPECT_THAT(Error(spec), HasSubstr("architecture \"GPT2LMHeadModel\" is not supported"));
}

TEST_F(JobSpecCheckTest, ModelWithoutWeights) {
  testing::WriteFile(dir_.Sub("noweights/config.json"), R"({"architectures": ["LlamaForCausalLM"]})");
  testing::WriteFile(dir_.Sub("noweights/tokenizer.json"), "{}");
  v1::JobSpec spec = Valid();
  spec.set_model_path(dir_.Sub("noweights"));
  EXPECT_THAT(Error(spec), HasSubstr("no weights"));
}

TEST_F(JobSpecCheckTest, OutOfRangeNumberNamesField) {
  v1::JobSpec spec = Valid();
  spec.mutable_sampling()->set_top_p(1.5);
  EXPECT_THAT(Error(spec), HasSubstr("spec.sampling.top_p: 1.5 is above the maximum 1"));
}

TEST_F(JobSpecCheckTest, LookaheadStepsDefaultsToNoneAndIsBounded) {
  v1::JobSpec spec = Valid();
  ASSERT_TRUE(CheckJobSpec({}, &spec).ok());
  EXPECT_TRUE(spec.has_lookahead_steps());
  EXPECT_EQ(spec.lookahead_steps(), 0);
  spec = Valid();
  spec.set_lookahead_steps(17);
  EXPECT_THAT(Error(spec), HasSubstr("spec.lookahead_steps: 17 is above the maximum 16"));
  spec.set_lookahead_steps(-1);
  EXPECT_THAT(Error(spec), HasSubstr("spec.lookahead_steps: -1 is below the minimum 0"));
}

TEST_F(JobSpecCheckTest, SpareGroupsAreAtMostABatch) {
  v1::JobSpec spec = Valid();
  ASSERT_TRUE(CheckJobSpec({}, &spec).ok());
  EXPECT_EQ(spec.spare_groups_per_step(), 0);
  spec = Valid();
  spec.set_prompts_per_step(4);
  spec.set_spare_groups_per_step(4);
  ASSERT_TRUE(CheckJobSpec({}, &spec).ok());
  spec.set_spare_groups_per_step(5);
  EXPECT_THAT(Error(spec),
              HasSubstr("spec.spare_groups_per_step: 5 is larger than spec.prompts_per_step 4"));
}

TEST_F(JobSpecCheckTest, MicroBatchLargerThanBatch) {
  v1::JobSpec spec = Valid();
  spec.mutable_optimizer()->set_micro_batch_size(128);
  EXPECT_THAT(Error(spec), HasSubstr("spec.optimizer.micro_batch_size: 128 is larger than "
                                     "spec.optimizer.batch_size 64"));
}

TEST_F(JobSpecCheckTest, StopBelowLossNeedsAWarmStartToEnd) {
  v1::JobSpec spec = Valid();
  spec.mutable_sft()->set_stop_below_loss(0.05);
  spec.set_warm_start_steps(0);
  EXPECT_THAT(Error(spec), HasSubstr("spec.sft.stop_below_loss: 0.05 ends a warm start early, "
                                     "and this job has none"));
  spec.set_warm_start_steps(100);
  spec.set_algorithm(v1::ALGORITHM_SFT);
  EXPECT_THAT(Error(spec), HasSubstr("spec.sft.stop_below_loss"));
}

TEST_F(JobSpecCheckTest, UnknownChatFormat) {
  v1::JobSpec spec = Valid();
  spec.mutable_prompt()->set_chat_format("alpaca");
  EXPECT_THAT(Error(spec), HasSubstr("spec.prompt.chat_format: \"alpaca\""));
}

TEST_F(JobSpecCheckTest, TaskFolderMissing) {
  v1::JobSpec spec = Valid();
  spec.mutable_tasks()->set_kernelbench_dir("/nonexistent/tasks");
  EXPECT_THAT(Error(spec), HasSubstr("spec.tasks: /nonexistent/tasks"));
}

TEST_F(JobSpecCheckTest, HeldoutTaskMustExist) {
  v1::JobSpec spec = Valid();
  spec.mutable_tasks()->add_heldout("level1/99_Missing");
  EXPECT_THAT(Error(spec), HasSubstr("spec.tasks.heldout: task \"level1/99_Missing\""));
}

TEST_F(JobSpecCheckTest, SupervisedNeedsReferenceSolutions) {
  v1::JobSpec spec = Valid();
  spec.set_algorithm(v1::ALGORITHM_SFT);
  spec.mutable_tasks()->add_levels(2);  // level 2 has no solution
  EXPECT_THAT(Error(spec), HasSubstr("needs reference solutions"));
  spec.mutable_tasks()->clear_levels();
  EXPECT_TRUE(CheckJobSpec({}, &spec).ok());
}

}  // namespace
}  // namespace kforge
