// LocalJobWatcher (`kforge local`'s job side) against a real learner: its log
// follower prints each of the job's log lines once, also across WatchJob
// streams that end at their deadline mid-job and are opened again (the
// default deadline is 10 minutes, shorter than a default CPU job).
#include "cli/local_job.h"

#include <map>
#include <regex>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kforge/v1/job.pb.h"
#include "tests/support/mesh.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

TEST(LocalJobWatcherTest, PrintsEveryLogLineOnceAcrossStreamsThatEndAtTheirDeadline) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteTinyModelDir(dir.Sub("tiny")).ok());
  auto learner =
      testing::StartServiceProcess(
      "kforge-learner", {"--state_dir=" + dir.Sub("state"), "--model_roots=" + dir.path()}, dir.path());
  ASSERT_TRUE(learner.ok()) << learner.status();
  // Supervised steps need no rollout worker or verifier; a checkpoint every
  // other step logs a line every few hundred milliseconds.
  v1::JobSpec spec = testing::FastJobSpec(dir.Sub("tiny"));
  spec.set_algorithm(v1::ALGORITHM_SFT);
  spec.set_total_steps(24);
  spec.mutable_checkpoint()->set_every_steps(2);
  constexpr absl::Duration kStreamDeadline = absl::Milliseconds(300);
  // What the watcher printed is captured; failures are reported after the
  // capture ends (gtest's own output would go into it).
  std::string failure;
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  ::testing::internal::CaptureStdout();
  const absl::Time start = absl::Now();
  {
    LocalJobWatcher watcher(learner->address(), ChannelSecurity(), kStreamDeadline);
    absl::StatusOr<std::string> id = watcher.SubmitOrResume(spec);
    const absl::Time give_up = absl::Now() + absl::Minutes(4);
    bool ended = false;
    if (!id.ok()) failure = absl::StrCat("SubmitOrResume: ", id.status().ToString());
    while (failure.empty() && !ended && absl::Now() < give_up) {
      absl::StatusOr<bool> polled = watcher.Poll();
      if (!polled.ok()) failure = absl::StrCat("Poll: ", polled.status().ToString());
      ended = polled.ok() && *polled;
      if (!ended) absl::SleepFor(absl::Milliseconds(50));
    }
    if (failure.empty() && !ended) failure = "the job did not end within 4 minutes";
    state = watcher.job().state();
    // As kforge local does before its summary: the last lines (step 24's
    // checkpoint, logged just before the job ended) are printed, not lost
    // with a stream cancelled under them.
    if (ended) watcher.FinishLog(absl::Seconds(30));
  }
  const absl::Duration took = absl::Now() - start;
  const std::string output = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(failure, "") << output;
  EXPECT_EQ(state, v1::JOB_SUCCEEDED) << output;
  // The job outlived several streams, so the test checks the re-opening.
  ASSERT_GT(took, 4 * kStreamDeadline) << output;
  std::map<int, int> printed;  // checkpoint step -> times printed
  const std::regex line("kforge local: job log: checkpoint written: \\S*step-0*([0-9]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    ++printed[std::stoi((*it)[1])];
  }
  for (int step = 2; step <= 24; step += 2) {
    EXPECT_EQ(printed[step], 1) << "checkpoint of step " << step << "\n" << output;
  }
}

}  // namespace
}  // namespace kforge
