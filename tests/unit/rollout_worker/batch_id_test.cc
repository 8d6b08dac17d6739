// BatchId: candidates of seed_rotation_versions consecutive policy versions
// share a batch (and so their tasks' secret seeds and reference epochs); the
// next version past a multiple starts a new one, which NextBatchId names
// ahead for the verifiers.
#include "rollout_worker/rollout_pipeline.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

TEST(BatchIdTest, VersionsShareABatchUntilTheNextMultipleOfTheRotation) {
  EXPECT_EQ(BatchId("job-000001", 8, 4), "job-000001/v8");
  EXPECT_EQ(BatchId("job-000001", 11, 4), "job-000001/v8");
  EXPECT_EQ(BatchId("job-000001", 12, 4), "job-000001/v12");
  EXPECT_EQ(BatchId("job-000001", 3, 4), "job-000001/v0");
}

TEST(BatchIdTest, ARotationOfOneOrLessIsAVersionEach) {
  EXPECT_EQ(BatchId("j", 7, 1), "j/v7");
  EXPECT_EQ(BatchId("j", 7, 0), "j/v7") << "an unset rotation";
  EXPECT_EQ(BatchId("j", 7, -3), "j/v7");
}

TEST(BatchIdTest, TheNextBatchIsTheOneTheVersionAfterThisBatchStarts) {
  for (int64_t version = 8; version < 12; ++version) {
    EXPECT_EQ(NextBatchId("job-000001", version, 4), "job-000001/v12") << version;
    EXPECT_EQ(NextBatchId("job-000001", version, 4), BatchId("job-000001", 12, 4));
  }
  EXPECT_EQ(NextBatchId("j", 7, 1), "j/v8");
  EXPECT_EQ(NextBatchId("j", 7, 0), "j/v8") << "an unset rotation";
}

}  // namespace
}  // namespace kforge
