// A candidate's process runs only while the verifier asks it something:
// CandidateSession stops its process group once each reply is in and
// resumes it for the next request, so nothing a candidate leaves running
// can load the GPU under another candidate's timing.
#include "verifier_worker/funnel/candidate_session.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "verifier_worker/python/python_interpreter.h"
#include "verifier_worker/sandbox/zygote_client.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// The state letter of /proc/<pid>/stat: 'T' stopped, 'S' sleeping, ...
char ProcessState(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string stat = text.str();
  const size_t paren = stat.rfind(')');  // the name may hold spaces
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

TEST(CandidateSessionTest, TheCandidateIsStoppedBetweenRequestsAndResumedForEach) {
  absl::StatusOr<PythonInfo> python = FindPythonWithTorch("", absl::Seconds(120));
  ASSERT_TRUE(python.ok()) << python.status();
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("kforge-session-test-", ::getpid());
  fs::create_directories(dir / "candidate");
  absl::StatusOr<std::unique_ptr<ZygoteClient>> zygote = ZygoteClient::Start(
      {.python = python->path,
       .harness_dir = (fs::path(KFORGE_TEST_BIN_DIR).parent_path() / "share/kforge/harness").string(),
       .log_dir = (dir / "logs").string(),
       .device = "cpu"},
      absl::Seconds(120));
  ASSERT_TRUE(zygote.ok()) << zygote.status();
  Frame config;
  config.Set("work_dir", (dir / "candidate").string())
      .Set("device", "cpu")
      .Set("max_open_files", 256)
      .Set("max_file_bytes", int64_t{1} << 26)
      .Set("max_processes", 64)
      .Set("memory_bytes", int64_t{1} << 33)
      .Set("threads", 1)
      .Set("warm_up", false);
  absl::StatusOr<std::unique_ptr<CandidateSession>> session = CandidateSession::Start(
      std::shared_ptr<ZygoteClient>(*std::move(zygote)), config.header, absl::Seconds(60));
  ASSERT_TRUE(session.ok()) << session.status();
  const int pid = (*session)->pid();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Frame> pong = (*session)->Request(Frame::Of("ping"), absl::Seconds(30));
    ASSERT_TRUE(pong.ok()) << pong.status();
    EXPECT_EQ(pong->type(), "pong");
    // The stop is a signal: give the kernel a moment to deliver it.
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (ProcessState(pid) != 'T' && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    EXPECT_EQ(ProcessState(pid), 'T') << "request " << i;
  }
  session->reset();  // killed and reaped, stopped or not
  EXPECT_NE(ProcessState(pid), 'T');
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace kforge
