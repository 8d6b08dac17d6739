// `kforge local` starts the whole mesh, reports it SERVING, and Ctrl-C stops
// every service it started.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/client/rpc_client.h"
#include "common/config/json_config.h"
#include "common/process/child_process.h"
#include "kforge/v1/service_config.pb.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

bool IsRunning(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

TEST(KforgeLocalTest, StartsEveryServiceAndCtrlCStopsThemAll) {
  testing::TempDir dir;
  auto local = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local",
                                             "--learner_port=0", "--verifiers=2",
                                             "--run_dir=" + dir.Sub("run")},
                                    .capture_output = true});
  ASSERT_TRUE(local.ok()) << local.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!absl::StrContains((*local)->output(), "all services SERVING")) {
    ASSERT_LT(absl::Now(), deadline) << (*local)->output();
    auto exit = (*local)->WaitFor(absl::Milliseconds(100));
    ASSERT_FALSE(exit.ok()) << "kforge local exited early: " << (*local)->output();
  }
  const std::string output = (*local)->output();
  for (const char* name : {"learner", "verifier-0", "verifier-1", "rollout-0"}) {
    EXPECT_THAT(output, HasSubstr(name));
  }
  std::vector<int> pids;
  for (const char* name : {"learner", "verifier-0", "verifier-1", "rollout-0"}) {
    v1::ServingPorts ports;
    auto json = ReadFileToString(dir.Sub(std::string("run/") + name + ".ports"));
    ASSERT_TRUE(json.ok()) << json.status();
    ASSERT_TRUE(ParseJsonMessage(*json, &ports).ok());
    EXPECT_TRUE(WaitForServing(MakeChannel("127.0.0.1:" + std::to_string(ports.grpc_port())),
                               absl::Seconds(5))
                    .ok())
        << name;
    pids.push_back(ports.pid());
  }

  (*local)->Signal(SIGINT);
  auto exit = (*local)->WaitFor(absl::Seconds(60));
  ASSERT_TRUE(exit.ok()) << (*local)->output();
  EXPECT_TRUE(exit->exited);
  EXPECT_EQ(exit->code, 0) << (*local)->output();
  EXPECT_THAT((*local)->output(), HasSubstr("stopped learner"));
  for (int pid : pids) EXPECT_FALSE(IsRunning(pid)) << "service pid " << pid << " survived";
}

TEST(KforgeLocalTest, AServiceThatCannotStartIsReportedWithItsLog) {
  testing::TempDir dir;
  auto local = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local",
                                             "--learner_port=0", "--python=/nonexistent/py",
                                             "--run_dir=" + dir.Sub("run")},
                                    .capture_output = true});
  ASSERT_TRUE(local.ok());
  auto exit = (*local)->WaitFor(absl::Seconds(120));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 1);
  EXPECT_THAT((*local)->output(), HasSubstr("verifier-0 exited (exit code 2)"));
  EXPECT_THAT((*local)->output(), HasSubstr("/nonexistent/py"));
}

}  // namespace
}  // namespace kforge
