#include "common/process/child_process.h"

#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kforge {
namespace {

using ::testing::HasSubstr;

TEST(ChildProcessTest, CapturesOutputAndExitCode) {
  auto child = ChildProcess::Spawn(
      {.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, .capture_output = true});
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<ExitInfo> exit = (*child)->WaitFor(absl::Seconds(10));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->exited);
  EXPECT_EQ(exit->code, 3);
  EXPECT_THAT((*child)->output(), HasSubstr("out\n"));
  EXPECT_THAT((*child)->output(), HasSubstr("err\n"));
}

TEST(ChildProcessTest, EnvironmentIsAdded) {
  auto child = ChildProcess::Spawn({.argv = {"/bin/sh", "-c", "echo $KFORGE_X"},
                                    .env = {{"KFORGE_X", "forty-two"}},
                                    .capture_output = true});
  ASSERT_TRUE(child.ok());
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)).ok());
  EXPECT_EQ((*child)->output(), "forty-two\n");
}

TEST(ChildProcessTest, OnlyTheNamedVariablesPassWhenANameListIsGiven) {
  ASSERT_EQ(::setenv("KFORGE_TEST_TOKEN", "secret", 1), 0);
  ASSERT_EQ(::setenv("KFORGE_KEEP_ONE", "a", 1), 0);
  ASSERT_EQ(::setenv("KFORGE_KEEPER", "b", 1), 0);
  auto child = ChildProcess::Spawn(
      {.argv = {"/bin/sh", "-c", "echo \"$KFORGE_TEST_TOKEN|$KFORGE_KEEP_ONE|$KFORGE_KEEPER|$KFORGE_X\""},
       .env = {{"KFORGE_X", "added"}},
       .pass_env = std::vector<std::string>{"PATH", "KFORGE_KEEP*"},
       .capture_output = true});
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)).ok());
  EXPECT_EQ((*child)->output(), "|a|b|added\n");
  // Without a list, everything passes.
  child = ChildProcess::Spawn(
      {.argv = {"/bin/sh", "-c", "echo $KFORGE_TEST_TOKEN"}, .capture_output = true});
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)).ok());
  EXPECT_EQ((*child)->output(), "secret\n");
  ::unsetenv("KFORGE_TEST_TOKEN");
  ::unsetenv("KFORGE_KEEP_ONE");
  ::unsetenv("KFORGE_KEEPER");
}

// Alive and not a zombie waiting to be reaped by init.
bool IsRunning(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

TEST(ChildProcessTest, WaitForTimesOutThenTerminateKillsWholeGroup) {
  // The shell ignores SIGTERM and starts a grandchild (which inherits that);
  // Terminate must escalate to SIGKILL and stop both.
  auto child = ChildProcess::Spawn(
      {.argv = {"/bin/sh", "-c", "trap '' TERM; sleep 1000 & echo $!; wait"},
       .capture_output = true});
  ASSERT_TRUE(child.ok());
  absl::StatusOr<ExitInfo> waited = (*child)->WaitFor(absl::Milliseconds(300));
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded);
  const pid_t grandchild = std::stoi((*child)->output());
  ASSERT_TRUE(IsRunning(grandchild));
  const ExitInfo exit = (*child)->Terminate(absl::Milliseconds(300));
  EXPECT_FALSE(exit.exited);
  EXPECT_EQ(exit.signal, SIGKILL);
  for (int i = 0; i < 100 && IsRunning(grandchild); ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_FALSE(IsRunning(grandchild)) << "grandchild survived the group kill";
}

TEST(ChildProcessTest, MissingProgramExits127WithMessage) {
  auto child = ChildProcess::Spawn({.argv = {"/nonexistent/prog"}, .capture_output = true});
  ASSERT_TRUE(child.ok());
  absl::StatusOr<ExitInfo> exit = (*child)->WaitFor(absl::Seconds(10));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 127);
  EXPECT_THAT((*child)->output(), HasSubstr("/nonexistent/prog"));
}

TEST(ChildProcessTest, OutputIsBounded) {
  auto child = ChildProcess::Spawn({.argv = {"/bin/sh", "-c", "head -c 100000 /dev/zero"},
                                    .capture_output = true,
                                    .max_output_bytes = 1000});
  ASSERT_TRUE(child.ok());
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)).ok());
  EXPECT_EQ((*child)->output().size(), 1000u);
}

}  // namespace
}  // namespace kforge
