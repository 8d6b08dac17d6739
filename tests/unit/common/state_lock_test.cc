#include "common/process/state_lock.h"

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/server/host_name.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

TEST(StateLockTest, ASecondHolderIsRefusedNamingTheFirst) {
  testing::TempDir dir;
  auto first = StateLock::Acquire(dir.Sub("state"), "kforge-learner");
  ASSERT_TRUE(first.ok()) << first.status();
  // flock excludes other open files, in this process too.
  auto second = StateLock::Acquire(dir.Sub("state"), "kforge-learner");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("state folder ", dir.Sub("state"), " is in use by pid ",
                                     ::getpid(), " on host ", HostName())));
  EXPECT_THAT(second.status().message(), HasSubstr("(kforge-learner)"));
  EXPECT_THAT(second.status().message(), HasSubstr(dir.Sub("state") + "/LOCK"));
}

TEST(StateLockTest, TheFolderIsFreeOnceTheHolderLetsGo) {
  testing::TempDir dir;
  {
    auto first = StateLock::Acquire(dir.path(), "one");
    ASSERT_TRUE(first.ok());
  }
  EXPECT_TRUE(StateLock::Acquire(dir.path(), "two").ok());
}

TEST(StateLockTest, LocksOfOtherNamesInOneFolderAreIndependent) {
  testing::TempDir dir;
  auto run = StateLock::Acquire(dir.path(), "kforge local", "kforge-local.lock");
  auto state = StateLock::Acquire(dir.path(), "kforge-learner");
  EXPECT_TRUE(run.ok());
  EXPECT_TRUE(state.ok());
}

}  // namespace
}  // namespace kforge
