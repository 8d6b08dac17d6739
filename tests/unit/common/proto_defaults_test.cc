#include "common/config/proto_defaults.h"

#include <gtest/gtest.h>

#include "kforge/v1/job.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "kforge/v1/verifier_options.pb.h"

namespace kforge {
namespace {

TEST(ProtoDefaultsTest, FillsUnsetScalarsFromAnnotations) {
  v1::JobSpec spec;
  ASSERT_TRUE(ApplyProtoDefaults(&spec).ok());
  EXPECT_EQ(spec.grpo().group_size(), 8);
  EXPECT_DOUBLE_EQ(spec.grpo().clip_low(), 0.2);
  EXPECT_DOUBLE_EQ(spec.grpo().clip_high(), 0.28);
  EXPECT_EQ(spec.algorithm(), v1::ALGORITHM_GRPO);
  EXPECT_EQ(spec.prompt().chat_format(), "chatml");
  EXPECT_DOUBLE_EQ(spec.reward().fail_compile(), 0.3);
  EXPECT_EQ(spec.verifier().timing().trials(), 50);
  EXPECT_TRUE(spec.verifier().require_triton());
}

TEST(ProtoDefaultsTest, KeepsExplicitValuesIncludingZero) {
  v1::JobSpec spec;
  spec.mutable_grpo()->set_group_size(16);
  spec.mutable_verifier()->set_require_triton(false);
  spec.mutable_reward()->set_fail_compile(0.0);
  ASSERT_TRUE(ApplyProtoDefaults(&spec).ok());
  EXPECT_EQ(spec.grpo().group_size(), 16);
  EXPECT_FALSE(spec.verifier().require_triton());
  EXPECT_DOUBLE_EQ(spec.reward().fail_compile(), 0.0);
}

TEST(ProtoDefaultsTest, MessageDefaultFillsOnlyUnsetSubfields) {
  v1::VerifierOptions options;
  options.mutable_tolerances()->mutable_fp32()->set_atol(1e-3);
  ASSERT_TRUE(ApplyProtoDefaults(&options).ok());
  EXPECT_DOUBLE_EQ(options.tolerances().fp32().atol(), 1e-3);
  EXPECT_DOUBLE_EQ(options.tolerances().fp32().rtol(), 1e-4);
  EXPECT_DOUBLE_EQ(options.tolerances().bf16().atol(), 2e-2);
}

TEST(ProtoDefaultsTest, DoesNotCreateUnchosenOneofMembers) {
  v1::JobSpec spec;
  ASSERT_TRUE(ApplyProtoDefaults(&spec).ok());
  EXPECT_EQ(spec.tasks().source_case(), v1::TaskSetSpec::SOURCE_NOT_SET);
}

TEST(ProtoDefaultsTest, EveryConfigTypesAnnotationsParse) {
  v1::LearnerConfig learner;
  v1::RolloutWorkerConfig rollout;
  v1::VerifierWorkerConfig verifier;
  EXPECT_TRUE(ApplyProtoDefaults(&learner).ok());
  EXPECT_TRUE(ApplyProtoDefaults(&rollout).ok());
  EXPECT_TRUE(ApplyProtoDefaults(&verifier).ok());
  EXPECT_EQ(learner.server().max_rpc_threads(), 64);
  EXPECT_DOUBLE_EQ(rollout.rpc().deadline_s(), 10);
  EXPECT_EQ(verifier.work_dir(), "/tmp/kforge-verifier");
}

}  // namespace
}  // namespace kforge
