// StopMatcher: EOS ids, stop strings within and across tokens, several stop
// strings, the token limit, and the text kept in each case.
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/sampling/stop_matcher.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kEos = 2;
constexpr int32_t kText = 100;  // any non-EOS id

StopMatcher MakeMatcher(std::vector<std::string> stops, int32_t max_new_tokens = 0) {
  absl::StatusOr<StopMatcher> matcher =
      StopMatcher::Create({.stop_strings = std::move(stops),
                           .eos_token_ids = {kEos, 7},
                           .max_new_tokens = max_new_tokens});
  EXPECT_TRUE(matcher.ok()) << matcher.status();
  return *std::move(matcher);
}

// Feeds the pieces as non-EOS tokens until the matcher finishes.
FinishReason Feed(StopMatcher& matcher, const std::vector<std::string>& pieces) {
  FinishReason reason = FinishReason::kNone;
  for (const std::string& piece : pieces) {
    reason = matcher.Append(kText, piece);
    if (reason != FinishReason::kNone) break;
  }
  return reason;
}

TEST(StopMatcherTest, WithoutAStopTheTextIsEveryTokenConcatenated) {
  StopMatcher plain = MakeMatcher({"```"});
  EXPECT_EQ(Feed(plain, {"def ", "f(", "x):"}), FinishReason::kNone);
  EXPECT_EQ(plain.text(), "def f(x):");
  EXPECT_FALSE(plain.finished());
  EXPECT_EQ(plain.tokens(), 3);
}

TEST(StopMatcherTest, AStopStringInsideOneTokenCutsTheTextBeforeIt) {
  StopMatcher matcher = MakeMatcher({"```"});
  EXPECT_EQ(Feed(matcher, {"code", "\n```\ntrailing"}), FinishReason::kStopString);
  EXPECT_EQ(matcher.text(), "code\n");
  EXPECT_EQ(matcher.matched_stop_string(), "```");
  EXPECT_EQ(matcher.tokens(), 2);
}

TEST(StopMatcherTest, AStopStringSpanningTokensIsFoundWhenItsLastByteArrives) {
  StopMatcher matcher = MakeMatcher({"</answer>"});
  EXPECT_EQ(Feed(matcher, {"42 </", "ans", "w"}), FinishReason::kNone);
  EXPECT_EQ(matcher.Append(kText, "er>!"), FinishReason::kStopString);
  EXPECT_EQ(matcher.text(), "42 ");
}

TEST(StopMatcherTest, OneByteTokensAndSelfOverlappingStopStrings) {
  StopMatcher matcher = MakeMatcher({"aab"});
  EXPECT_EQ(Feed(matcher, {"x", "a", "a", "a", "b", "y"}), FinishReason::kStopString);
  EXPECT_EQ(matcher.text(), "xa");
  EXPECT_EQ(matcher.tokens(), 5);
}

TEST(StopMatcherTest, OfSeveralStopStringsTheEarliestOccurrenceWins) {
  // "</code>" starts before "```" although "```" completes in the same token.
  StopMatcher matcher = MakeMatcher({"```", "</code>"});
  EXPECT_EQ(Feed(matcher, {"x</co", "de>```"}), FinishReason::kStopString);
  EXPECT_EQ(matcher.text(), "x");
  EXPECT_EQ(matcher.matched_stop_string(), "</code>");
  StopMatcher other = MakeMatcher({"</code>", "```"});
  EXPECT_EQ(Feed(other, {"y```</code>"}), FinishReason::kStopString);
  EXPECT_EQ(other.text(), "y");
  EXPECT_EQ(other.matched_stop_string(), "```");
}

TEST(StopMatcherTest, AStopStringAtTheVeryStartLeavesNoText) {
  StopMatcher matcher = MakeMatcher({"STOP"});
  EXPECT_EQ(Feed(matcher, {"ST", "OP"}), FinishReason::kStopString);
  EXPECT_EQ(matcher.text(), "");
}

TEST(StopMatcherTest, MatchesAMultiByteCharacterSplitAcrossTokens) {
  StopMatcher matcher = MakeMatcher({"\xC3\xA9"});  // "é" as UTF-8
  EXPECT_EQ(Feed(matcher, {"caf", "\xC3", "\xA9 au lait"}), FinishReason::kStopString);
  EXPECT_EQ(matcher.text(), "caf");
}

TEST(StopMatcherTest, AnEosIdFinishesWithoutAddingItsText) {
  StopMatcher matcher = MakeMatcher({"```"});
  EXPECT_EQ(Feed(matcher, {"done"}), FinishReason::kNone);
  EXPECT_EQ(matcher.Append(7, "<|im_end|>"), FinishReason::kEos);
  EXPECT_EQ(matcher.text(), "done");
  EXPECT_EQ(matcher.tokens(), 2);  // the EOS token counts
  EXPECT_EQ(FinishReasonName(matcher.finish_reason()), "eos");
}

TEST(StopMatcherTest, TheTokenLimitCountsEveryTokenAndAStopOnTheLastOneWins) {
  StopMatcher limited = MakeMatcher({"```"}, /*max_new_tokens=*/3);
  EXPECT_EQ(Feed(limited, {"a", "b", "c", "d"}), FinishReason::kMaxTokens);
  EXPECT_EQ(limited.text(), "abc");
  EXPECT_EQ(limited.tokens(), 3);
  StopMatcher stopped = MakeMatcher({"```"}, /*max_new_tokens=*/3);
  EXPECT_EQ(Feed(stopped, {"a", "``", "`"}), FinishReason::kStopString);
  EXPECT_EQ(stopped.text(), "a");
}

TEST(StopMatcherTest, AfterFinishingFurtherTokensChangeNothing) {
  StopMatcher matcher = MakeMatcher({"\n\n"});
  EXPECT_EQ(Feed(matcher, {"a\n", "\nb"}), FinishReason::kStopString);
  EXPECT_EQ(matcher.Append(kEos, ""), FinishReason::kStopString);
  EXPECT_EQ(matcher.Append(kText, "more"), FinishReason::kStopString);
  EXPECT_EQ(matcher.text(), "a");
  EXPECT_EQ(matcher.tokens(), 2);
}

TEST(StopMatcherTest, RejectsAnEmptyStopStringAndANegativeLimit) {
  const absl::Status empty = StopMatcher::Create({.stop_strings = {"x", ""}}).status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.message(), HasSubstr("stop[1]"));
  const absl::Status negative = StopMatcher::Create({.max_new_tokens = -1}).status();
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.message(), HasSubstr("max_new_tokens: -1"));
}

TEST(StopMatcherTest, FinishReasonNamesAreThoseOfTheSampleProto) {
  EXPECT_EQ(FinishReasonName(FinishReason::kNone), "");
  EXPECT_EQ(FinishReasonName(FinishReason::kEos), "eos");
  EXPECT_EQ(FinishReasonName(FinishReason::kStopString), "stop_string");
  EXPECT_EQ(FinishReasonName(FinishReason::kMaxTokens), "max_tokens");
}

TEST(StopConditionsFromProtoTest, CopiesStopStringsAndDefaultsTheTokenLimit) {
  v1::SamplingParams proto;
  proto.add_stop("```");
  proto.add_stop("</s>");
  const absl::StatusOr<StopConditions> conditions = StopConditionsFromProto(proto, {kEos});
  ASSERT_TRUE(conditions.ok()) << conditions.status();
  EXPECT_THAT(conditions->stop_strings, ::testing::ElementsAre("```", "</s>"));
  EXPECT_EQ(conditions->max_new_tokens, 1024);
  EXPECT_TRUE(conditions->eos_token_ids.contains(kEos));
}

}  // namespace
}  // namespace kforge
