// SeedBatchAt: groups offered in seed_rotation_versions consecutive RL steps
// share a batch (their tasks' secret seeds and reference epochs); the step
// past a multiple starts the next, which every earlier group names ahead for
// the verifiers. The warm start's groups (warm-ups) meet the first RL
// steps' batch.
#include "learner/rollout/seed_batch.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

TEST(SeedBatchTest, StepsShareABatchUntilTheNextMultipleOfTheRotation) {
  EXPECT_EQ(SeedBatchAt("job-000001", 0, 4).id, "job-000001/b0");
  EXPECT_EQ(SeedBatchAt("job-000001", 3, 4).id, "job-000001/b0");
  EXPECT_EQ(SeedBatchAt("job-000001", 4, 4).id, "job-000001/b4");
  EXPECT_EQ(SeedBatchAt("job-000001", 7, 4).id, "job-000001/b4");
  EXPECT_EQ(SeedBatchAt("job-000001", 8, 4).id, "job-000001/b8");
}

TEST(SeedBatchTest, TheNextBatchIsTheOneTheStepAfterThisBatchStarts) {
  for (int64_t step = 4; step < 8; ++step) {
    EXPECT_EQ(SeedBatchAt("job-000001", step, 4).next_id, "job-000001/b8") << step;
    EXPECT_EQ(SeedBatchAt("job-000001", step, 4).next_id, SeedBatchAt("job-000001", 8, 4).id);
  }
}

TEST(SeedBatchTest, TheWarmStartMeetsTheFirstRlStepsBatch) {
  EXPECT_EQ(SeedBatchAt("j", -150, 4).id, SeedBatchAt("j", 0, 4).id);
  EXPECT_EQ(SeedBatchAt("j", -1, 4).next_id, "j/b4");
}

TEST(SeedBatchTest, ARotationOfOneOrLessIsAStepEach) {
  EXPECT_EQ(SeedBatchAt("j", 7, 1).id, "j/b7");
  EXPECT_EQ(SeedBatchAt("j", 7, 1).next_id, "j/b8");
  EXPECT_EQ(SeedBatchAt("j", 7, 0).id, "j/b7") << "an unset rotation";
  EXPECT_EQ(SeedBatchAt("j", 7, -3).next_id, "j/b8");
}

}  // namespace
}  // namespace kforge
