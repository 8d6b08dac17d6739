#include "learner/jobs/job_registry.h"

#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

class JobRegistryTest : public ::testing::Test {
 protected:
  std::unique_ptr<JobRegistry> Open(int max_queued = 64, int buffer = 1024) {
    auto registry = JobRegistry::Create(
        {.state_dir = dir_.path(), .max_queued_jobs = max_queued, .watch_buffer_events = buffer},
        &metrics_);
    EXPECT_TRUE(registry.ok()) << registry.status();
    return std::move(*registry);
  }
  v1::JobSpec Spec(const std::string& name) {
    v1::JobSpec spec;
    spec.set_name(name);
    spec.set_total_steps(5);
    return spec;
  }
  testing::TempDir dir_;
  prometheus::Registry prometheus_;
  LearnerMetrics metrics_{prometheus_};
};

TEST_F(JobRegistryTest, SubmitQueuesInOrderAndListsNewestFirst) {
  auto registry = Open();
  auto a = registry->Submit(Spec("a"));
  auto b = registry->Submit(Spec("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->state(), v1::JOB_QUEUED);
  EXPECT_EQ(a->queue_position(), 0);
  EXPECT_EQ(b->queue_position(), 1);
  const auto jobs = registry->List({}, 10);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].id(), b->id());
  EXPECT_EQ(registry->List({v1::JOB_RUNNING}, 10).size(), 0u);
  EXPECT_EQ(metrics_.JobsInState(v1::JOB_QUEUED).Value(), 2);
}

TEST_F(JobRegistryTest, QueueFullIsResourceExhausted) {
  auto registry = Open(/*max_queued=*/1);
  ASSERT_TRUE(registry->Submit(Spec("a")).ok());
  auto second = registry->Submit(Spec("b"));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(JobRegistryTest, CancelEndsJobAndSecondCancelFails) {
  auto registry = Open();
  auto job = registry->Submit(Spec("a"));
  auto cancelled = registry->Cancel(job->id(), "");
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state(), v1::JOB_CANCELLED);
  EXPECT_GT(cancelled->finished_at_us(), 0);
  EXPECT_EQ(registry->Cancel(job->id(), "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry->Cancel("job-999999", "").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobRegistryTest, StateSurvivesReopen) {
  std::string id;
  {
    auto registry = Open();
    id = registry->Submit(Spec("a"))->id();
    ASSERT_TRUE(registry->Cancel(id, "because").ok());
  }
  auto reopened = Open();
  auto job = reopened->Get(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_CANCELLED);
  EXPECT_EQ(job->message(), "because");
  EXPECT_EQ(job->spec().name(), "a");
  // New ids continue after the old ones.
  EXPECT_GT(reopened->Submit(Spec("b"))->id(), id);
}

TEST_F(JobRegistryTest, OneJobRunsAtATime) {
  auto registry = Open();
  auto a = registry->Submit(Spec("a"));
  auto b = registry->Submit(Spec("b"));
  auto started = registry->StartNext();
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->id(), a->id());
  EXPECT_FALSE(registry->StartNext().has_value());
  ASSERT_TRUE(registry->Finish(a->id(), v1::JOB_SUCCEEDED, "").ok());
  EXPECT_EQ(registry->StartNext()->id(), b->id());
  EXPECT_FALSE(registry->Finish(b->id(), v1::JOB_RUNNING, "").ok());
}

TEST_F(JobRegistryTest, WatcherSeesCurrentStateThenChangesUntilEnd) {
  auto registry = Open();
  auto job = registry->Submit(Spec("a"));
  auto first = registry->WaitForEvents(job->id(), 0, absl::Seconds(1));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->events.size(), 1u);
  EXPECT_EQ(first->events[0].state_changed(), v1::JOB_QUEUED);
  EXPECT_FALSE(first->job_ended);

  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    v1::JobProgress progress;
    progress.set_step(1);
    ASSERT_TRUE(registry->ReportProgress(job->id(), progress).ok());
    ASSERT_TRUE(registry->Cancel(job->id(), "").ok());
  });
  std::vector<v1::JobEvent> seen;
  int64_t seq = first->last_seq;
  bool ended = false;
  for (int i = 0; i < 50 && !ended; ++i) {
    auto batch = registry->WaitForEvents(job->id(), seq, absl::Seconds(1));
    ASSERT_TRUE(batch.ok());
    seen.insert(seen.end(), batch->events.begin(), batch->events.end());
    seq = batch->last_seq;
    ended = batch->job_ended;
  }
  canceller.join();
  ASSERT_TRUE(ended);
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen.front().progress().step(), 1);
  EXPECT_EQ(seen.back().state_changed(), v1::JOB_CANCELLED);
}

TEST_F(JobRegistryTest, ANewWatcherAskingForReplaySeesTheHistoryThenTheCurrentState) {
  auto registry = Open();
  auto job = registry->Submit(Spec("a"));
  auto running = registry->StartNext();
  ASSERT_TRUE(running.has_value());
  ASSERT_TRUE(registry->Log(job->id(), "resumed from /ckpt/step-00000004 at step 4").ok());
  ASSERT_TRUE(registry->ReportCheckpoint(job->id(), "/ckpt/step-00000006").ok());

  // Without replay: the current state only.
  auto plain = registry->WaitForEvents(job->id(), 0, absl::Seconds(1));
  ASSERT_TRUE(plain.ok());
  ASSERT_EQ(plain->events.size(), 1u);
  EXPECT_EQ(plain->events[0].state_changed(), v1::JOB_RUNNING);

  auto replayed = registry->WaitForEvents(job->id(), 0, absl::Seconds(1), /*replay=*/true);
  ASSERT_TRUE(replayed.ok());
  std::vector<std::string> logs;
  for (const v1::JobEvent& e : replayed->events) {
    if (e.has_log()) logs.push_back(e.log());
  }
  ASSERT_GE(logs.size(), 2u);
  EXPECT_EQ(logs[0], "resumed from /ckpt/step-00000004 at step 4");
  EXPECT_NE(logs[1].find("/ckpt/step-00000006"), std::string::npos) << logs[1];
  // The history comes first, in order; the current state closes it, and
  // following goes on after the last event replayed.
  EXPECT_EQ(replayed->events.back().state_changed(), v1::JOB_RUNNING);
  EXPECT_EQ(replayed->last_seq, plain->last_seq);
  EXPECT_FALSE(replayed->job_ended);
}

TEST_F(JobRegistryTest, SlowWatcherIsToldEventsWereDropped) {
  auto registry = Open(64, /*buffer=*/2);
  auto job = registry->Submit(Spec("a"));
  for (int step = 1; step <= 5; ++step) {
    v1::JobProgress progress;
    progress.set_step(step);
    ASSERT_TRUE(registry->ReportProgress(job->id(), progress).ok());
  }
  auto batch = registry->WaitForEvents(job->id(), 1, absl::Milliseconds(10));
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->events.size(), 3u);
  EXPECT_THAT(batch->events[0].log(), HasSubstr("3 events dropped"));
  EXPECT_EQ(batch->events[2].progress().step(), 5);
}

TEST_F(JobRegistryTest, UnknownJobIsNotFound) {
  auto registry = Open();
  EXPECT_EQ(registry->Get("job-000042").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry->WaitForEvents("job-000042", 0, absl::Milliseconds(1)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(JobRegistryTest, ARunningJobIsFoundAgainAfterReopenWithItsCheckpoint) {
  {
    auto registry = Open();
    ASSERT_TRUE(registry->Submit(Spec("a")).ok());
    auto running = registry->StartNext();
    ASSERT_TRUE(running.has_value());
    ASSERT_TRUE(registry->ReportCheckpoint(running->id(), "/ckpt/step-00000004").ok());
    ASSERT_TRUE(registry->Log(running->id(), "resumed from somewhere").ok());
  }
  auto registry = Open();  // a learner restart
  auto running = registry->Running();
  ASSERT_TRUE(running.has_value());
  EXPECT_EQ(running->last_checkpoint(), "/ckpt/step-00000004");
  EXPECT_FALSE(registry->StartNext().has_value());  // it still holds the trainer
  EXPECT_EQ(registry->ReportCheckpoint("job-999999", "x").code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kforge
