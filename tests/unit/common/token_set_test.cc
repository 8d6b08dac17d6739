#include "common/security/token_set.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kFirst[] = "first-token-0123456789";
constexpr char kSecond[] = "second-token-0123456789";

TEST(TokenSetTest, AcceptsEveryListedTokenAndNothingElse) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("a"), std::string("# users\n\n  ") + kFirst + "  \n");
  testing::WriteFile(dir.Sub("b"), std::string(kSecond) + "\n");
  auto tokens = TokenSet::Create({dir.Sub("a"), dir.Sub("b")}, absl::Seconds(10));
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_TRUE((*tokens)->Accepts(kFirst));
  EXPECT_TRUE((*tokens)->Accepts(kSecond));
  EXPECT_FALSE((*tokens)->Accepts("first-token-012345678"));  // a prefix
  EXPECT_FALSE((*tokens)->Accepts(std::string(kFirst) + "x"));
  EXPECT_FALSE((*tokens)->Accepts(""));
  EXPECT_EQ((*tokens)->First(), kFirst) << "comments and blank lines are skipped";
  EXPECT_EQ((*tokens)->size(), 2u);
}

TEST(TokenSetTest, AShortTokenIsRefusedNamingTheLineNotTheToken) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("tokens"), std::string(kFirst) + "\nshort-secret\n");
  auto tokens = TokenSet::Create({dir.Sub("tokens")}, absl::Seconds(10));
  ASSERT_FALSE(tokens.ok());
  EXPECT_THAT(tokens.status().message(), HasSubstr(dir.Sub("tokens") + " line 2"));
  EXPECT_THAT(tokens.status().message(), Not(HasSubstr("short-secret")));
}

TEST(TokenSetTest, AMissingOrEmptyFileIsAnError) {
  testing::TempDir dir;
  EXPECT_FALSE(TokenSet::Create({dir.Sub("none")}, absl::Seconds(10)).ok());
  testing::WriteFile(dir.Sub("empty"), "# nothing yet\n");
  auto empty = TokenSet::Create({dir.Sub("empty")}, absl::Seconds(10));
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("holds no token"));
}

TEST(TokenSetTest, AChangedFileIsReadAgainAndABrokenOneKeepsTheLastGoodTokens) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("tokens"), std::string(kFirst) + "\n");
  auto tokens = TokenSet::Create({dir.Sub("tokens")}, absl::Milliseconds(10));
  ASSERT_TRUE(tokens.ok());
  testing::WriteFile(dir.Sub("tokens"), std::string(kSecond) + "\n");
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE((*tokens)->Accepts(kSecond));
  EXPECT_FALSE((*tokens)->Accepts(kFirst));
  testing::WriteFile(dir.Sub("tokens"), "short\n");
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE((*tokens)->Accepts(kSecond)) << "an invalid file does not lock everyone out";
}

}  // namespace
}  // namespace kforge
