// One writer per state: a learner holds an exclusive lock on its state
// folder, and `kforge local` on its run folder; a second one on the same
// folder refuses to start, naming the holder, and the folder is free again
// once the holder exits.
#include <unistd.h>

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/process/child_process.h"
#include "common/server/host_name.h"
#include "tests/support/fixtures.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

TEST(StateFolderTest, ASecondLearnerOnTheSameFolderRefusesToStartNamingTheFirst) {
  testing::TempDir dir;
  auto first = testing::StartServiceProcess("kforge-learner", {"--state_dir=" + dir.Sub("state")},
                                            dir.path());
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge-learner"), "--port=0",
                                              "--metrics_port=0", "--host=127.0.0.1",
                                              "--state_dir=" + dir.Sub("state")},
                                     .capture_output = true});
  ASSERT_TRUE(second.ok());
  auto exit = (*second)->WaitFor(absl::Seconds(30));
  ASSERT_TRUE(exit.ok()) << "the second learner is serving: " << (*second)->output();
  EXPECT_EQ(exit->code, 1);
  EXPECT_THAT((*second)->output(),
              HasSubstr(absl::StrCat("is in use by pid ", first->ports.pid(), " on host ",
                                     HostName())));
  EXPECT_FALSE(first->process->Poll().has_value()) << "the first learner keeps serving";

  // Once the holder is gone (however it went), the folder is free.
  first->process->Signal(SIGKILL);
  (void)first->process->WaitFor(absl::Seconds(10));
  auto third = testing::StartServiceProcess("kforge-learner", {"--state_dir=" + dir.Sub("state")},
                                            dir.path());
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST(StateFolderTest, KforgeLocalRefusesARunFolderInUse) {
  testing::TempDir dir;
  auto first = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local", "--serve",
                                             "--learner_port=0", "--run_dir=" + dir.Sub("run")},
                                    .capture_output = true});
  ASSERT_TRUE(first.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(180);
  while (!absl::StrContains((*first)->output(), "all services SERVING")) {
    ASSERT_LT(absl::Now(), deadline) << (*first)->output();
    ASSERT_FALSE((*first)->WaitFor(absl::Milliseconds(100)).ok()) << (*first)->output();
  }
  auto second = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local", "--serve",
                                              "--learner_port=0", "--run_dir=" + dir.Sub("run")},
                                     .capture_output = true});
  ASSERT_TRUE(second.ok());
  auto exit = (*second)->WaitFor(absl::Seconds(30));
  ASSERT_TRUE(exit.ok()) << (*second)->output();
  EXPECT_EQ(exit->code, 2);
  EXPECT_THAT((*second)->output(), HasSubstr("is in use by pid"));
  EXPECT_THAT((*second)->output(), HasSubstr("(kforge local)"));
  EXPECT_THAT((*first)->output(), HasSubstr("plaintext gRPC on 127.0.0.1"));
  (*first)->Signal(SIGINT);
  auto stopped = (*first)->WaitFor(absl::Seconds(60));
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->code, 0) << (*first)->output();
}

}  // namespace
}  // namespace kforge
