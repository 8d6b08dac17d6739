#include "common/config/json_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/struct.pb.h>

#include "kforge/v1/job.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

TEST(JsonConfigTest, UnknownFieldIsAnErrorNamingIt) {
  v1::JobSpec spec;
  const absl::Status status = ParseJsonMessage(R"({"model_path": "/m", "grop": {}})", &spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("grop"));
}

TEST(JsonConfigTest, WrongTypeIsAnError) {
  v1::JobSpec spec;
  const absl::Status status = ParseJsonMessage(R"({"total_steps": "many"})", &spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("total_steps"));
}

TEST(JsonConfigTest, AcceptsProtoAndCamelCaseNames) {
  v1::JobSpec spec;
  ASSERT_TRUE(ParseJsonMessage(R"({"model_path": "/a", "totalSteps": 7})", &spec).ok());
  EXPECT_EQ(spec.model_path(), "/a");
  EXPECT_EQ(spec.total_steps(), 7);
}

TEST(JsonConfigTest, MissingFileIsNotFoundNamingThePath) {
  v1::LearnerConfig config;
  const absl::Status status = LoadConfigFile("/nonexistent/learner.json", &config, "learner_config");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("/nonexistent/learner.json"));
}

TEST(JsonConfigTest, EmptyPathGivesDefaults) {
  v1::LearnerConfig config;
  ASSERT_TRUE(LoadConfigFile("", &config, "learner_config").ok());
  EXPECT_EQ(config.max_queued_jobs(), 64);
}

TEST(JsonConfigTest, LoadAppliesDefaultsAndChecksRanges) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("c.json"), R"({"server": {"drain_timeout_s": -1}})");
  v1::LearnerConfig config;
  const absl::Status status = LoadConfigFile(dir.Sub("c.json"), &config, "learner_config");
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("learner_config.server.drain_timeout_s: -1 s is below the minimum 0 s"));
}

TEST(JsonConfigTest, WriteAtomicallyThenReadBack) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.Sub("f"), "hello").ok());
  EXPECT_EQ(*ReadFileToString(dir.Sub("f")), "hello");
  ASSERT_TRUE(WriteFileAtomically(dir.Sub("f"), "again").ok());
  EXPECT_EQ(*ReadFileToString(dir.Sub("f")), "again");
}

TEST(JsonConfigTest, JsonRoundTrip) {
  v1::JobSpec spec;
  spec.set_model_path("/m");
  spec.mutable_grpo()->set_kl_coef(0.05);
  v1::JobSpec back;
  ASSERT_TRUE(ParseJsonMessage(ToJson(spec), &back).ok());
  EXPECT_EQ(back.SerializeAsString(), spec.SerializeAsString());
}

TEST(JsonConfigTest, AStructPrintsWithSortedKeysTheSameEveryTimeAndReadsBackExactly) {
  // A Struct is the JSON tree checkpoints and model folders are written from.
  google::protobuf::Struct tree;
  for (const char* key : {"zeta", "alpha", "mid", "beta", "omega", "kappa", "eps", "delta"}) {
    (*tree.mutable_fields())[key].set_number_value(1e-6);
  }
  // Every character that needs escaping, unquoted parameter names' old trap
  // included, and text beyond ASCII.
  const std::string awkward = "a \"quoted\" \\ name\n\t\x01 <|im_end|> \xc3\xa9";
  (*tree.mutable_fields())[awkward].set_string_value(awkward);
  (*tree.mutable_fields())["big"].set_number_value(3087007744.0);
  const std::string json = ToJson(tree);
  EXPECT_EQ(ToJson(tree), json);
  // Sorted keys: "a \"quoted..." < "alpha" < "beta" < "big" < ... < "zeta".
  EXPECT_LT(json.find("\"alpha\""), json.find("\"beta\""));
  EXPECT_LT(json.find("\"mid\""), json.find("\"omega\""));
  EXPECT_LT(json.find("\"omega\""), json.find("\"zeta\""));
  EXPECT_THAT(json, HasSubstr("3087007744"));  // an integer stays one
  google::protobuf::Struct back;
  ASSERT_TRUE(ParseJsonMessage(json, &back).ok()) << json;
  EXPECT_EQ(back.fields().at(awkward).string_value(), awkward);
  EXPECT_EQ(back.fields().at("big").number_value(), 3087007744.0);
  EXPECT_EQ(back.fields_size(), tree.fields_size());
}

}  // namespace
}  // namespace kforge
