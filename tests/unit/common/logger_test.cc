#include "common/logging/logger.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kforge {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(LoggerTest, FormatsLogfmtWithComponentLevelAndFields) {
  const std::string line =
      Logger("learner").Format(LogLevel::kInfo, "listening", {{"port", 50051}, {"ok", true}});
  EXPECT_THAT(line, StartsWith("ts="));
  EXPECT_THAT(line, HasSubstr(" level=info component=learner msg=listening port=50051 ok=true"));
  EXPECT_THAT(line, EndsWith("\n"));
}

TEST(LoggerTest, QuotesValuesWithSpacesQuotesAndNewlines) {
  const std::string line = Logger("v").Format(LogLevel::kError, "bad thing",
                                              {{"error", "a \"b\"\nc"}, {"empty", ""}});
  EXPECT_THAT(line, HasSubstr(R"(msg="bad thing" error="a \"b\"\nc" empty="")"));
}

}  // namespace
}  // namespace kforge
