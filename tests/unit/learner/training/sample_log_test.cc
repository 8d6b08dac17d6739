// The sample log: each line is one JSON object naming the step, task, group,
// reward, stage and the verdict's message; texts are cut where asked; only
// per_step samples a step are written, whole groups first; a folder that
// cannot be written is an error the caller can report.
#include "learner/training/sample_log.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kforge {
namespace {

ScoredGroup Group(const std::string& id, int size) {
  ScoredGroup group;
  group.item.set_group_id(id);
  group.item.mutable_task()->set_id("level1/19_ReLU");
  for (int i = 0; i < size; ++i) {
    v1::ScoredSample scored;
    scored.mutable_sample()->mutable_key()->set_index_in_group(i);
    scored.mutable_sample()->set_policy_version(7);
    scored.mutable_sample()->set_completion_text(absl::StrCat("<answer>code ", i, "</answer>"));
    scored.mutable_sample()->set_finish_reason("stop");
    scored.mutable_sample()->set_rollout_worker_id("rollout-1");
    scored.mutable_sample()->set_started_at_us(1795000000123456 + i);
    scored.mutable_sample()->set_finished_at_us(1795000002123456 + i);
    scored.set_verifier_id("verifier-0");
    v1::Verdict* verdict = scored.mutable_verdict();
    verdict->set_stage_reached(v1::STAGE_COMPILE);
    v1::StageResult* stage = verdict->add_stages();
    stage->set_stage(v1::STAGE_STATIC);
    stage->set_outcome(v1::OUTCOME_PASSED);
    stage->set_seconds(0.25);
    stage = verdict->add_stages();
    stage->set_stage(v1::STAGE_COMPILE);
    stage->set_outcome(v1::OUTCOME_FAILED);
    stage->set_seconds(12.5);
    verdict->set_total_seconds(13);
    verdict->set_device_wait_seconds(4);
    verdict->set_queue_seconds(1.5);
    verdict->set_reference_reused(true);
    verdict->set_started_at_us(1795000002500001);
    verdict->set_finished_at_us(1795000015500001);
    stage->set_message("NameError: name 'tl' is not defined (line 4)");
    verdict->add_hack_flags(v1::HACK_TORCH_FALLBACK);
    group.samples.push_back(scored);
    RewardBreakdown reward;
    reward.total = 0.4;
    reward.explanation = "failed compile: 0.3 + format 0.1";
    group.rewards.push_back(reward);
  }
  return group;
}

google::protobuf::Struct Parse(const std::string& line) {
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &parsed).ok()) << line;
  return parsed;
}

TEST(SampleLogTest, ALineNamesTheStepTaskRewardStageAndWhyItFailed) {
  const std::string text = SampleLogLine(121, Group("g1", 2), 1, 4000);
  // Keys in a fixed order for people reading the file: where it is from
  // first, the completion last.
  EXPECT_EQ(text.rfind(R"({"step":121,"task":"level1/19_ReLU","group":"g1",)", 0), 0u) << text;
  const size_t completion = text.find(R"(,"completion":")");
  ASSERT_NE(completion, std::string::npos) << text;
  EXPECT_EQ(text.find("\":", completion + 15), std::string::npos) << "a key after the completion";
  const google::protobuf::Struct line = Parse(text);
  const auto& f = line.fields();
  EXPECT_EQ(f.at("step").number_value(), 121);
  EXPECT_EQ(f.at("task").string_value(), "level1/19_ReLU");
  EXPECT_EQ(f.at("group").string_value(), "g1");
  EXPECT_EQ(f.at("index").number_value(), 1);
  EXPECT_EQ(f.at("policy_version").number_value(), 7);
  EXPECT_DOUBLE_EQ(f.at("reward").number_value(), 0.4);
  EXPECT_EQ(f.at("reward_explained").string_value(), "failed compile: 0.3 + format 0.1");
  EXPECT_EQ(f.at("stage_reached").string_value(), "STAGE_COMPILE");
  EXPECT_EQ(f.at("outcome").string_value(), "OUTCOME_FAILED");
  EXPECT_EQ(f.at("message").string_value(), "NameError: name 'tl' is not defined (line 4)");
  ASSERT_EQ(f.at("hack_flags").list_value().values_size(), 1);
  EXPECT_EQ(f.at("hack_flags").list_value().values(0).string_value(), "HACK_TORCH_FALLBACK");
  EXPECT_EQ(f.at("completion").string_value(), "<answer>code 1</answer>");
  EXPECT_FALSE(f.at("correct").bool_value());
  // Where the verification's time went.
  EXPECT_DOUBLE_EQ(f.at("verify_seconds").number_value(), 13);
  EXPECT_DOUBLE_EQ(f.at("device_wait_seconds").number_value(), 4);
  EXPECT_DOUBLE_EQ(f.at("queue_seconds").number_value(), 1.5);
  const auto& stages = f.at("stage_seconds").struct_value().fields();
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_DOUBLE_EQ(stages.at("STAGE_STATIC").number_value(), 0.25);
  EXPECT_DOUBLE_EQ(stages.at("STAGE_COMPILE").number_value(), 12.5);
  EXPECT_TRUE(f.at("reference_reused").bool_value());
  EXPECT_FALSE(f.at("baselines_cached").bool_value());
  // Who worked on it and when, to the microsecond (the text, since a
  // parsed double would hide a rounding to the second).
  EXPECT_EQ(f.at("rollout_worker").string_value(), "rollout-1");
  EXPECT_EQ(f.at("verifier").string_value(), "verifier-0");
  EXPECT_NE(text.find(R"("generation_started_us":1795000000123457,)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("generation_finished_us":1795000002123457,)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("verify_started_us":1795000002500001,)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("verify_finished_us":1795000015500001,)"), std::string::npos) << text;
}

TEST(SampleLogTest, LongTextsKeepTheirHeadAndSayHowMuchWasCut) {
  ScoredGroup group = Group("g1", 1);
  // "é" is two bytes: a cut inside it backs off to the character's start.
  group.samples[0].mutable_sample()->set_completion_text("abcé" + std::string(100, 'x'));
  const google::protobuf::Struct line = Parse(SampleLogLine(1, group, 0, 4));
  EXPECT_EQ(line.fields().at("completion").string_value(), "abc\n[... 102 more bytes]");
}

TEST(SampleLogTest, AMultiTurnLineNamesItsTurnAndAFollowUpTheEndOfItsPrompt) {
  ScoredGroup single = Group("g1", 1);
  EXPECT_FALSE(Parse(SampleLogLine(1, single, 0, 4000)).fields().count("turn"));
  ScoredGroup group = Group("g1", 2);
  group.item.mutable_multi_turn()->set_max_turns(2);
  group.samples[1].mutable_sample()->mutable_key()->set_turn(1);
  // "é" is two bytes: a cut inside it moves on to the next character.
  group.samples[1].mutable_sample()->set_prompt_text("task " + std::string(50, 'x') +
                                                     "é feedback: NameError");
  const google::protobuf::Struct first = Parse(SampleLogLine(1, group, 0, 4000));
  EXPECT_EQ(first.fields().at("turn").number_value(), 0);
  EXPECT_FALSE(first.fields().count("prompt"));
  const google::protobuf::Struct second = Parse(SampleLogLine(1, group, 1, 21));
  EXPECT_EQ(second.fields().at("turn").number_value(), 1);
  EXPECT_EQ(second.fields().at("prompt").string_value(),
            "[57 bytes before ...]\n feedback: NameError");
}

TEST(SampleLogTest, QuotesControlCharactersAndBytesThatAreNotUtf8StayValidJson) {
  ScoredGroup group = Group("g1", 1);
  // "\xe2\x82" is a euro sign without its end, "\xed\xa0\x80" a UTF-16
  // surrogate: each ill-formed sequence becomes one U+FFFD, as the
  // tokenizer's decode makes it.
  group.samples[0].mutable_sample()->set_completion_text(
      std::string("say \"hi\"\tback\\slash\x01 \xe2\x82 \xed\xa0\x80 \xc3\xa9"));
  const std::string text = SampleLogLine(1, group, 0, 4000);
  const google::protobuf::Struct line = Parse(text);
  EXPECT_EQ(line.fields().at("completion").string_value(),
            "say \"hi\"\tback\\slash\x01 \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
            "\xc3\xa9")
      << text;
}

TEST(SampleLogTest, AppendsPerStepSamplesWholeGroupsFirst) {
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("samples-", getpid(), ".jsonl");
  std::filesystem::remove(file);
  v1::SampleLogSpec spec;
  spec.set_per_step(5);
  spec.set_max_chars(100);
  ASSERT_TRUE(AppendSampleLog(file, 3, {Group("a", 4), Group("b", 4)}, spec).ok());
  ASSERT_TRUE(AppendSampleLog(file, 4, {Group("c", 2)}, spec).ok());
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines = absl::StrSplit(text.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 7u);
  std::vector<std::string> groups;
  for (const std::string& line : lines) {
    groups.push_back(Parse(line).fields().at("group").string_value());
  }
  EXPECT_EQ(groups, (std::vector<std::string>{"a", "a", "a", "a", "b", "c", "c"}));
  EXPECT_EQ(Parse(lines.back()).fields().at("step").number_value(), 4);
  std::filesystem::remove(file);
}

TEST(SampleLogTest, NothingIsWrittenWhenPerStepIsZeroAndAnUnwritablePathIsAnError) {
  // Under a plain file: no folder can be made there, not even by root.
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("not-a-folder-", getpid());
  std::ofstream(file) << "x";
  const std::filesystem::path log = file / "samples.jsonl";
  v1::SampleLogSpec off;
  off.set_per_step(0);
  EXPECT_TRUE(AppendSampleLog(log, 1, {Group("a", 1)}, off).ok());
  v1::SampleLogSpec on;
  on.set_per_step(1);
  const absl::Status status = AppendSampleLog(log, 1, {Group("a", 1)}, on);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(log.string()), std::string::npos) << status;
  std::filesystem::remove(file);
}

TEST(SampleLogTest, TheJobsFolderIsMadeWhenTheLogComesFirst) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("job-", getpid(), "/nested");
  std::filesystem::remove_all(dir.parent_path());
  v1::SampleLogSpec spec;
  spec.set_per_step(1);
  ASSERT_TRUE(AppendSampleLog(dir / "samples.jsonl", 1, {Group("a", 1)}, spec).ok());
  EXPECT_TRUE(std::filesystem::exists(dir / "samples.jsonl"));
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace kforge
