#include "common/config/proto_validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/config/proto_defaults.h"
#include "kforge/v1/job.pb.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

v1::JobSpec Defaulted() {
  v1::JobSpec spec;
  spec.set_model_path("/m");
  spec.mutable_tasks()->set_builtin("x");
  EXPECT_TRUE(ApplyProtoDefaults(&spec).ok());
  return spec;
}

TEST(ProtoValidationTest, DefaultsAreInRange) {
  EXPECT_TRUE(ValidateProtoFields(Defaulted(), "spec").ok());
}

TEST(ProtoValidationTest, AboveMaximumNamesFieldValueAndBound) {
  v1::JobSpec spec = Defaulted();
  spec.mutable_grpo()->set_clip_low(1.5);
  const absl::Status status = ValidateProtoFields(spec, "spec");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("spec.grpo.clip_low: 1.5 is above the maximum 1"));
}

TEST(ProtoValidationTest, BelowMinimumNamesNestedField) {
  v1::JobSpec spec = Defaulted();
  spec.mutable_verifier()->mutable_timing()->set_trials(2);
  EXPECT_THAT(std::string(ValidateProtoFields(spec, "spec").message()),
              HasSubstr("spec.verifier.timing.trials: 2 is below the minimum 5"));
}

TEST(ProtoValidationTest, GreaterThanIsStrictAndShowsUnit) {
  v1::JobSpec spec = Defaulted();
  spec.set_group_timeout_s(0);
  EXPECT_THAT(std::string(ValidateProtoFields(spec, "spec").message()),
              HasSubstr("spec.group_timeout_s: 0 s must be greater than 0 s"));
}

TEST(ProtoValidationTest, RequiredFieldMissing) {
  v1::JobSpec spec = Defaulted();
  spec.clear_model_path();
  EXPECT_THAT(std::string(ValidateProtoFields(spec, "spec").message()),
              HasSubstr("spec.model_path: is required"));
}

TEST(ProtoValidationTest, RepeatedFieldElementCount) {
  v1::JobSpec spec = Defaulted();
  for (int i = 0; i < 17; ++i) spec.mutable_sampling()->add_stop("x");
  EXPECT_THAT(std::string(ValidateProtoFields(spec, "spec").message()),
              HasSubstr("spec.sampling.stop: element count 17 is above the maximum 16"));
}

TEST(ProtoValidationTest, ExplicitUnspecifiedEnumIsRejected) {
  v1::JobSpec spec = Defaulted();
  spec.set_algorithm(v1::ALGORITHM_UNSPECIFIED);
  EXPECT_THAT(std::string(ValidateProtoFields(spec, "spec").message()),
              HasSubstr("spec.algorithm: must not be ALGORITHM_UNSPECIFIED"));
}

TEST(ProtoValidationTest, ServerPortOutOfRange) {
  v1::LearnerConfig config;
  config.mutable_server()->set_port(70000);
  ASSERT_TRUE(ApplyProtoDefaults(&config).ok());
  EXPECT_THAT(std::string(ValidateProtoFields(config, "learner_config").message()),
              HasSubstr("learner_config.server.port: 70000 is above the maximum 65535"));
}

}  // namespace
}  // namespace kforge
