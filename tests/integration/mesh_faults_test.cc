// Faults in a running mesh of real processes on loopback (a learner, one or
// two verifiers, one or two rollout workers, each started on its own so a test
// can kill, stop or restart it): the job still finishes, and the learner's
// counters prove that no sample was lost or counted twice. Malformed messages
// and clients that hang up are refused, counted, and the service carries on.
// Every process is killed (its whole process group) when its ServiceProcess
// goes out of scope, so a failing test leaves nothing behind.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/client/rpc_client.h"
#include "common/config/json_config.h"
#include "common/process/child_process.h"
#include "kforge/v1/job_service.grpc.pb.h"
#include "kforge/v1/learner_service.grpc.pb.h"
#include "kforge/v1/verifier_service.grpc.pb.h"
#include "tests/support/fixtures.h"
#include "tests/support/mesh.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;
using testing::Eventually;
using testing::ScrapeMetric;

constexpr char kAccepted[] = R"(kforge_learner_samples_total{status="accepted"})";
constexpr char kDuplicate[] = R"(kforge_learner_samples_total{status="duplicate"})";
constexpr char kRejected[] = R"(kforge_learner_samples_total{status="rejected"})";
constexpr char kCompleted[] = R"(kforge_learner_groups_total{event="completed"})";
constexpr char kReissued[] = R"(kforge_learner_groups_total{event="reissued"})";
constexpr char kDropped[] = R"(kforge_learner_groups_total{event="dropped"})";
constexpr char kIssued[] = R"(kforge_learner_groups_total{event="issued"})";

std::string Source(const std::string& relative) {
  absl::StatusOr<std::string> text =
      ReadFileToString(std::string(KFORGE_TEST_SOURCE_DIR) + "/" + relative);
  return text.ok() ? *text : "";
}


class MeshFaultTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_root_ = new testing::TempDir;
    model_status_ = new absl::Status(testing::WriteTinyModelDir(ModelDir()));
  }
  static void TearDownTestSuite() {
    delete model_root_;
    delete model_status_;
  }
  static std::string ModelDir() { return model_root_->Sub("tiny"); }

  void SetUp() override { ASSERT_TRUE(model_status_->ok()) << *model_status_; }

  // Workers are expired 3 s after their last heartbeat (1 s apart).
  absl::StatusOr<testing::ServiceProcess> StartLearner(int port = 0) {
    const std::string config = dir_.Sub("learner.json");
    testing::WriteFile(config, R"({"worker_timeout_s": 3, "heartbeat_interval_s": 1,
                                   "device": "cpu", "max_take_work_wait_s": 2})");
    return testing::StartServiceProcess(
        "kforge-learner",
        {"--config=" + config, "--state_dir=" + dir_.Sub("state"), absl::StrCat("--port=", port),
         "--model_roots=" + model_root_->path()},
        dir_.path());
  }

  absl::StatusOr<testing::ServiceProcess> StartVerifier(const std::string& name,
                                                        const std::string& learner,
                                                        const std::string& extra = "") {
    const std::string config = dir_.Sub(name + ".json");
    testing::WriteFile(config, absl::StrCat(R"({"work_dir": ")", dir_.Sub(name + "-work"),
                                            R"(", "learner_address": ")", learner,
                                            R"(", "rpc": {"backoff_initial_s": 0.1,
                                            "backoff_max_s": 1})", extra, "}"));
    return testing::StartServiceProcess("kforge-verifier", {"--config=" + config}, dir_.path());
  }

  absl::StatusOr<testing::ServiceProcess> StartRollout(const std::string& name,
                                                       const std::string& learner,
                                                       const std::string& verifiers,
                                                       const std::string& extra = "") {
    const std::string config = dir_.Sub(name + ".json");
    testing::WriteFile(config, absl::StrCat(R"({"max_batch_sequences": 8, "take_work_wait_s": 1,
                                            "rpc": {"backoff_initial_s": 0.1,
                                            "backoff_max_s": 1})", extra, "}"));
    return testing::StartServiceProcess(
        "kforge-rollout",
        {"--config=" + config, "--learner=" + learner, "--verifiers=" + verifiers,
         "--model=" + ModelDir(), "--name=" + name},
        dir_.path());
  }

  void Connect(const testing::ServiceProcess& learner) {
    jobs_ = v1::JobService::NewStub(MakeChannel(learner.address()));
  }

  absl::StatusOr<v1::Job> Submit(const v1::JobSpec& spec) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(30));
    v1::Job job;
    grpc::Status s = jobs_->SubmitJob(&context, spec, &job);
    if (!s.ok()) return absl::InternalError("SubmitJob: " + s.error_message());
    return job;
  }

  v1::Job GetJob(const std::string& id) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(5));
    v1::GetJobRequest request;
    request.set_job_id(id);
    v1::Job job;
    if (!jobs_->GetJob(&context, request, &job).ok()) job.Clear();
    return job;
  }

  // Polls GetJob until `done` holds for it or `timeout`; returns the last seen.
  v1::Job WaitForJob(const std::string& id, const std::function<bool(const v1::Job&)>& done,
                     absl::Duration timeout) {
    v1::Job job;
    Eventually([&] { return done(job = GetJob(id)); }, timeout);
    return job;
  }
  static bool Ended(const v1::Job& job) {
    return job.state() == v1::JOB_SUCCEEDED || job.state() == v1::JOB_FAILED ||
           job.state() == v1::JOB_CANCELLED;
  }

  // Every sample accepted belongs to exactly one group slot: with no group
  // re-issued or dropped, accepted == completed groups x group size, so a
  // sample counted twice would show. Re-sends come back as duplicates.
  // The learner refreshes its group counters once per heartbeat interval
  // (1 s here); sample counters move at once. Waits until the groups are in.
  static void SettleGroupCounters(int metrics_port, const v1::JobSpec& spec) {
    Eventually([&] {
      return ScrapeMetric(metrics_port, kCompleted) >= spec.total_steps() * spec.prompts_per_step();
    }, absl::Seconds(10));
    absl::SleepFor(absl::Milliseconds(1500));
  }

  void ExpectExactlyOnceAccounting(int metrics_port, const v1::JobSpec& spec) {
    SettleGroupCounters(metrics_port, spec);
    const double accepted = ScrapeMetric(metrics_port, kAccepted);
    const double completed = ScrapeMetric(metrics_port, kCompleted);
    const int g = spec.grpo().group_size();
    // A multi-turn group holds g trajectories of 1 to max_turns turns each.
    const int turns = std::max(1, spec.multi_turn().max_turns());
    EXPECT_GE(completed, spec.total_steps() * spec.prompts_per_step());
    if (ScrapeMetric(metrics_port, kReissued) == 0 && ScrapeMetric(metrics_port, kDropped) == 0 &&
        turns == 1) {
      EXPECT_EQ(accepted, completed * g) << "a sample was counted twice or lost";
    } else {
      // Samples of a group retired half-full were accepted too; no more than
      // the issued groups hold.
      EXPECT_GE(accepted, completed * g);
      EXPECT_LE(accepted, ScrapeMetric(metrics_port, kIssued) * g * turns);
    }
    ExpectLedgerBalances(metrics_port);
  }

 public:
  // Every accepted sample is in exactly one place of the learner's ledger
  // (a completed group, a group retired before it completed, a group still
  // filling), and the ledger's count is the acks' count.
  static void ExpectLedgerBalances(int metrics_port) {
    const testing::SampleLedger ledger = testing::SettledLedger(metrics_port);
    EXPECT_EQ(ledger.accepted, ledger.acks_accepted) << ledger.Describe();
    EXPECT_TRUE(ledger.Balanced()) << ledger.Describe();
  }

 protected:

  testing::TempDir dir_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  static testing::TempDir* model_root_;
  static absl::Status* model_status_;
};

testing::TempDir* MeshFaultTest::model_root_ = nullptr;
absl::Status* MeshFaultTest::model_status_ = nullptr;

TEST_F(MeshFaultTest, AVerifierKilledMidJobHasItsSamplesReverifiedElsewhereAndNoneCountedTwice) {
  auto learner = StartLearner();
  ASSERT_TRUE(learner.ok()) << learner.status();
  auto doomed = StartVerifier("verifier-a", learner->address());
  ASSERT_TRUE(doomed.ok()) << doomed.status();
  auto survivor = StartVerifier("verifier-b", learner->address());
  ASSERT_TRUE(survivor.ok()) << survivor.status();
  auto rollout = StartRollout("rollout-0", learner->address(),
                              doomed->address() + "," + survivor->address());
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  Connect(*learner);
  v1::JobSpec spec = testing::FastJobSpec(ModelDir());
  // Steps enough that, however late under load the stop below comes, later
  // steps still sample tasks whose verifier (task affinity) is A: with the
  // shared six it failed now and then under CI's load, no sample waiting at A,
  // with twelve once more (a CI run of 1023 tests), and with 24 once (a CI
  // run of 1037: the job can end before a task of A's comes up). Steps
  // after the stop cost little: A's samples wait for the kill, B answers
  // the rest at once.
  spec.set_total_steps(48);
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  const int rollout_metrics = rollout->ports.metrics_port();
  const std::string sent = R"(kforge_rollout_samples_total{event="sent"})";

  // Once the flow runs, verifier A freezes: what is written to it waits
  // there, unanswered. Then it dies holding that work.
  ASSERT_GE(WaitForJob(job->id(), [](const v1::Job& j) { return j.progress().step() >= 1; },
                       absl::Seconds(90)).progress().step(), 1) << learner->Log();
  doomed->process->Signal(SIGSTOP);
  const double sent_at_stop = ScrapeMetric(rollout_metrics, sent);
  // Verifier B answers in milliseconds: samples outstanding for 2.5 s on
  // end are A's.
  absl::Time outstanding_since = absl::InfiniteFuture();
  ASSERT_TRUE(Eventually(
      [&] {
        if (ScrapeMetric(rollout_metrics, sent) < sent_at_stop + 2 ||
            ScrapeMetric(rollout_metrics, "kforge_rollout_samples_outstanding") < 1) {
          outstanding_since = absl::InfiniteFuture();
          return false;
        }
        outstanding_since = std::min(outstanding_since, absl::Now());
        return absl::Now() - outstanding_since > absl::Milliseconds(2500);
      },
      absl::Seconds(60)))
      << "no sample waited at the stopped verifier";
  const std::vector<int> helpers = testing::DescendantPids(doomed->process->pid());
  doomed->process->Signal(SIGKILL);
  ASSERT_TRUE(doomed->process->WaitFor(absl::Seconds(10)).ok());

  const v1::Job final_job = WaitForJob(job->id(), Ended, absl::Seconds(120));
  ASSERT_EQ(final_job.state(), v1::JOB_SUCCEEDED) << final_job.message() << learner->Log();
  EXPECT_EQ(final_job.progress().step(), spec.total_steps());
  // The worker's counters are published by a 1 s ticker: a re-send just
  // before the job's end shows up on the next tick.
  EXPECT_TRUE(Eventually(
      [&] {
        return ScrapeMetric(rollout_metrics, R"(kforge_rollout_samples_total{event="resent"})") >
               0;
      },
      absl::Seconds(10)))
      << "the dead verifier's samples were not re-sent";
  // Every sample the worker produced got its one verdict.
  EXPECT_TRUE(Eventually(
      [&] {
        const double submitted =
            ScrapeMetric(rollout_metrics, R"(kforge_rollout_samples_total{event="submitted"})");
        return submitted > 0 &&
               submitted == ScrapeMetric(rollout_metrics,
                                         R"(kforge_rollout_samples_total{event="answered"})");
      },
      absl::Seconds(20)));
  ExpectExactlyOnceAccounting(learner->ports.metrics_port(), spec);
  EXPECT_LE(ScrapeMetric(learner->ports.metrics_port(), kAccepted),
            ScrapeMetric(rollout_metrics, R"(kforge_rollout_samples_total{event="submitted"})"));
  EXPECT_GE(ScrapeMetric(learner->ports.metrics_port(), kDuplicate), 0);
  for (int pid : helpers) EXPECT_FALSE(testing::ProcessAlive(pid)) << "verifier helper " << pid;
  // On the CPU every decode step of the job ran eagerly, and was counted.
  EXPECT_GT(ScrapeMetric(rollout_metrics, R"(kforge_rollout_decode_step_runs_total{mode="eager"})"),
            0);
  EXPECT_EQ(ScrapeMetric(rollout_metrics, R"(kforge_rollout_decode_step_runs_total{mode="graph"})"),
            0);
}

TEST_F(MeshFaultTest, ARolloutWorkerKilledMidJobHasItsGroupsReissuedAndTheJobFinishes) {
  auto learner = StartLearner();
  ASSERT_TRUE(learner.ok()) << learner.status();
  auto verifier = StartVerifier("verifier", learner->address());
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  // The doomed worker's verifier target does not answer (port 1), so the
  // groups it takes stay incomplete until it dies: the learner must notice.
  auto doomed = StartRollout("doomed", learner->address(), "127.0.0.1:1");
  ASSERT_TRUE(doomed.ok()) << doomed.status();
  Connect(*learner);
  const v1::JobSpec spec = testing::FastJobSpec(ModelDir());
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  const int metrics = learner->ports.metrics_port();
  ASSERT_TRUE(Eventually([&] { return ScrapeMetric(metrics, kIssued) >= spec.prompts_per_step(); },
                         absl::Seconds(90)))
      << learner->Log();
  const double issued = ScrapeMetric(metrics, kIssued);
  const std::vector<int> helpers = testing::DescendantPids(doomed->process->pid());
  doomed->process->Signal(SIGKILL);
  ASSERT_TRUE(doomed->process->WaitFor(absl::Seconds(10)).ok());
  auto healthy = StartRollout("healthy", learner->address(), verifier->address());
  ASSERT_TRUE(healthy.ok()) << healthy.status();

  const v1::Job final_job = WaitForJob(job->id(), Ended, absl::Seconds(120));
  ASSERT_EQ(final_job.state(), v1::JOB_SUCCEEDED)
      << final_job.message() << learner->Log() << healthy->Log() << verifier->Log();
  SettleGroupCounters(metrics, spec);
  EXPECT_GE(ScrapeMetric(metrics, "kforge_learner_workers_expired_total"), 1);
  EXPECT_THAT(learner->Log(), HasSubstr("rollout worker expired"));
  // Each group the dead worker held was re-issued (it had one attempt left).
  EXPECT_GE(ScrapeMetric(metrics, kReissued), issued);
  EXPECT_GE(final_job.progress().groups_reissued(), issued);
  ExpectExactlyOnceAccounting(metrics, spec);
  for (int pid : helpers) EXPECT_FALSE(testing::ProcessAlive(pid)) << "rollout helper " << pid;
}

// Multi-turn trajectories (JobSpec.multi_turn): a rollout worker killed
// while it holds trajectories between turns takes their state with it; the
// learner re-issues their groups whole, and no turn is counted twice.
TEST_F(MeshFaultTest, ARolloutWorkerKilledMidTrajectoryHasItsGroupsReissuedWhole) {
  auto learner = StartLearner();
  ASSERT_TRUE(learner.ok()) << learner.status();
  auto verifier = StartVerifier("verifier", learner->address());
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  auto doomed = StartRollout("doomed", learner->address(), verifier->address());
  ASSERT_TRUE(doomed.ok()) << doomed.status();
  Connect(*learner);
  v1::JobSpec spec = testing::FastJobSpec(ModelDir());
  spec.mutable_multi_turn()->set_max_turns(3);
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  const int metrics = learner->ports.metrics_port();
  // Second turns are being sampled: trajectories are open on the worker.
  ASSERT_TRUE(Eventually([&] { return ScrapeMetric(metrics, kAccepted) > spec.grpo().group_size(); },
                         absl::Seconds(90)))
      << learner->Log();
  doomed->process->Signal(SIGKILL);
  ASSERT_TRUE(doomed->process->WaitFor(absl::Seconds(10)).ok());
  auto healthy = StartRollout("healthy", learner->address(), verifier->address());
  ASSERT_TRUE(healthy.ok()) << healthy.status();

  const v1::Job final_job = WaitForJob(job->id(), Ended, absl::Seconds(180));
  ASSERT_EQ(final_job.state(), v1::JOB_SUCCEEDED)
      << final_job.message() << learner->Log() << healthy->Log() << verifier->Log();
  SettleGroupCounters(metrics, spec);
  EXPECT_GE(ScrapeMetric(metrics, kReissued), 1);
  ExpectExactlyOnceAccounting(metrics, spec);
}

TEST_F(MeshFaultTest, AGroupTheWorkerCannotSampleIsGivenBackAndReissuedWithoutWaitingForTimeout) {
  auto learner = StartLearner();
  ASSERT_TRUE(learner.ok()) << learner.status();
  auto verifier = StartVerifier("verifier", learner->address());
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  auto rollout = StartRollout("rollout-0", learner->address(), verifier->address());
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  Connect(*learner);
  // Groups of 16 do not fit the worker's 8 sequence slots: it refuses each
  // one. Released, they are re-issued (once) and then dropped within
  // seconds, not after the 600 s group timeout.
  v1::JobSpec spec = testing::FastJobSpec(ModelDir());
  spec.mutable_grpo()->set_group_size(16);
  spec.mutable_optimizer()->set_batch_size(32);
  spec.mutable_optimizer()->set_micro_batch_size(8);
  spec.set_group_timeout_s(600);
  spec.set_max_dropped_groups_per_step(6);
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  const int metrics = learner->ports.metrics_port();
  const int rollout_metrics = rollout->ports.metrics_port();
  EXPECT_TRUE(Eventually(
      [&] {
        return ScrapeMetric(rollout_metrics, "kforge_rollout_groups_released_total") >= 2 &&
               ScrapeMetric(metrics, kReissued) >= 1 &&
               ScrapeMetric(metrics, kDropped) >= 1;
      },
      absl::Seconds(60)))
      << learner->Log() << rollout->Log();
  EXPECT_THAT(learner->Log(), HasSubstr("group released by its worker; re-issued"));
  EXPECT_THAT(learner->Log(), HasSubstr("group_size 16 outside [1, 8]"));
  // No worker can ever sample this job: once a step has lost
  // max_dropped_groups_per_step groups and none came back, the job fails
  // with the worker's reason instead of offering groups forever.
  const v1::Job ended = WaitForJob(job->id(), Ended, absl::Seconds(120));
  EXPECT_EQ(ended.state(), v1::JOB_FAILED) << ended.DebugString();
  EXPECT_THAT(ended.message(), HasSubstr("6 groups of this step were dropped"));
  EXPECT_THAT(ended.message(), HasSubstr("group_size 16 outside [1, 8]"));
}

TEST_F(MeshFaultTest, ALearnerKilledMidJobResumesFromItsCheckpointAndWorkersReconnect) {
  auto learner = StartLearner();
  ASSERT_TRUE(learner.ok()) << learner.status();
  const int port = learner->ports.grpc_port();
  auto verifier = StartVerifier("verifier", learner->address());
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  auto rollout = StartRollout("rollout-0", learner->address(), verifier->address());
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  Connect(*learner);
  const v1::JobSpec spec = testing::FastJobSpec(ModelDir());
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();

  const v1::Job checkpointed = WaitForJob(
      job->id(), [](const v1::Job& j) { return !j.last_checkpoint().empty(); }, absl::Seconds(90));
  ASSERT_FALSE(checkpointed.last_checkpoint().empty()) << learner->Log();
  learner->process->Signal(SIGKILL);
  ASSERT_TRUE(learner->process->WaitFor(absl::Seconds(10)).ok());
  ASSERT_LT(checkpointed.progress().step(), spec.total_steps()) << "the job ended before the kill";

  auto restarted = StartLearner(port);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  Connect(*restarted);
  const v1::Job final_job = WaitForJob(job->id(), Ended, absl::Seconds(120));
  ASSERT_EQ(final_job.state(), v1::JOB_SUCCEEDED) << final_job.message() << restarted->Log();
  EXPECT_EQ(final_job.progress().step(), spec.total_steps());

  // A watcher of the new learner that asks for replay sees the job's
  // "resumed from" line (logged before any watcher could attach).
  {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(30));
    v1::WatchJobRequest watch;
    watch.set_job_id(job->id());
    watch.set_replay(true);
    auto reader = jobs_->WatchJob(&context, watch);
    v1::JobEvent event;
    std::string resumed;
    while (reader->Read(&event)) {
      if (event.has_log() && absl::StartsWith(event.log(), "resumed from ")) resumed = event.log();
    }
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_THAT(resumed, HasSubstr("/checkpoints/step-")) << "no \"resumed from\" event replayed";
  }

  // The restarted learner loaded the newest checkpoint and went on from its
  // step.
  const std::string log = restarted->Log();
  const size_t running = log.find("msg=\"job running\"");
  ASSERT_NE(running, std::string::npos) << log;
  const std::string line = log.substr(running, log.find('\n', running) - running);
  EXPECT_THAT(line, HasSubstr("/checkpoints/step-")) << "did not resume from a checkpoint";
  const size_t at = line.find(" step=");
  ASSERT_NE(at, std::string::npos) << line;
  int64_t step = -1;
  ASSERT_TRUE(absl::SimpleAtoi(line.substr(at + 6, line.find(' ', at + 6) - at - 6), &step)) << line;
  EXPECT_GE(step, spec.checkpoint().every_steps());
  EXPECT_EQ(step % spec.checkpoint().every_steps(), 0) << line;
  EXPECT_LT(step, spec.total_steps());

  // The worker found the new learner by itself and trained it to the end.
  EXPECT_EQ(ScrapeMetric(restarted->ports.metrics_port(), "kforge_learner_workers"), 1);
  EXPECT_GT(ScrapeMetric(restarted->ports.metrics_port(), kAccepted), 0);
  const std::string worker_log = rollout->Log();
  size_t registrations = 0;
  for (size_t p = worker_log.find("msg=registered"); p != std::string::npos;
       p = worker_log.find("msg=registered", p + 1)) {
    ++registrations;
  }
  EXPECT_GE(registrations, 2u) << worker_log;
  EXPECT_TRUE(WaitForServing(MakeChannel(rollout->address()), absl::Seconds(10)).ok());
}

TEST_F(MeshFaultTest, ASlowVerifierSlowsTheFlowAndOutstandingSamplesStayBounded) {
  auto learner = StartLearner();
  ASSERT_TRUE(learner.ok()) << learner.status();
  auto verifier = StartVerifier("verifier", learner->address(), R"(, "max_concurrent": 1)");
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  constexpr int kMaxUnacked = 3;
  auto rollout = StartRollout("rollout-0", learner->address(), verifier->address(),
                              absl::StrCat(R"(, "max_unacked_samples": )", kMaxUnacked));
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  Connect(*learner);
  const v1::JobSpec spec = testing::FastJobSpec(ModelDir());
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  const int port = rollout->ports.metrics_port();
  auto submitted = [&] {
    return ScrapeMetric(port, R"(kforge_rollout_samples_total{event="submitted"})");
  };
  auto answered = [&] {
    return ScrapeMetric(port, R"(kforge_rollout_samples_total{event="answered"})");
  };

  // Watches the worker's books for the whole run.
  std::atomic<bool> stop{false};
  std::atomic<double> max_outstanding{0}, max_unanswered{0};
  std::thread watcher([&] {
    while (!stop.load()) {
      auto body = testing::HttpGet(port, "/metrics");
      if (body.ok()) {
        const double out =
            testing::MetricValue(*body, "kforge_rollout_samples_outstanding").value_or(0);
        const double gap =
            testing::MetricValue(*body, R"(kforge_rollout_samples_total{event="submitted"})")
                .value_or(0) -
            testing::MetricValue(*body, R"(kforge_rollout_samples_total{event="answered"})")
                .value_or(0);
        if (out > max_outstanding.load()) max_outstanding = out;
        if (gap > max_unanswered.load()) max_unanswered = gap;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joiner() {
      stop = true;
      thread.join();
    }
  } joiner{stop, watcher};

  ASSERT_GE(WaitForJob(job->id(), [](const v1::Job& j) { return j.progress().step() >= 1; },
                       absl::Seconds(90)).progress().step(), 1) << learner->Log();
  // The verifier stops answering for a while (a long stall on a slow
  // candidate): sampling must stop once kMaxUnacked samples wait.
  const long rss_before = testing::ResidentKiB(rollout->process->pid());
  verifier->process->Signal(SIGSTOP);
  absl::SleepFor(absl::Seconds(4));
  const double plateau = submitted();
  absl::SleepFor(absl::Seconds(3));
  EXPECT_EQ(submitted(), plateau) << "the worker kept sampling for a stalled verifier";
  EXPECT_LE(plateau - answered(), kMaxUnacked);
  const long rss_stalled = testing::ResidentKiB(rollout->process->pid());
  verifier->process->Signal(SIGCONT);

  const v1::Job final_job = WaitForJob(job->id(), Ended, absl::Seconds(120));
  ASSERT_EQ(final_job.state(), v1::JOB_SUCCEEDED) << final_job.message() << learner->Log();
  EXPECT_LE(max_outstanding.load(), kMaxUnacked);
  EXPECT_LE(max_unanswered.load(), kMaxUnacked);
  EXPECT_GT(max_unanswered.load(), 0) << "the watcher saw no sample in flight";
  EXPECT_LT(rss_stalled - rss_before, 100 * 1024) << "resident memory grew during the stall";
  ExpectExactlyOnceAccounting(learner->ports.metrics_port(), spec);
}

// DeliverSamples with samples of a group really in flight (taken by a raw
// TakeWork client standing in for a rollout worker): each malformed one is
// REJECTED with its reason and counted, and the group still completes.
TEST_F(MeshFaultTest, MalformedDeliveriesAreRejectedWithReasonsAndTheGroupStillCompletes) {
  auto learner = StartLearner();
  ASSERT_TRUE(learner.ok()) << learner.status();
  Connect(*learner);
  auto job = Submit(testing::FastJobSpec(ModelDir()));
  ASSERT_TRUE(job.ok()) << job.status();
  auto stub = v1::LearnerService::NewStub(MakeChannel(learner->address()));
  v1::WorkItem item;
  ASSERT_TRUE(Eventually(
      [&] {
        grpc::ClientContext context;
        SetDeadline(context, absl::Seconds(5));
        v1::TakeWorkRequest request;
        request.set_worker_id("raw-client");
        request.set_max_groups(1);
        request.set_wait_ms(1000);
        v1::TakeWorkResponse response;
        if (!stub->TakeWork(&context, request, &response).ok() || response.items_size() == 0) {
          return false;
        }
        item = response.items(0);
        return true;
      },
      absl::Seconds(90)))
      << learner->Log();
  auto sample = [&](int index) {
    v1::ScoredSample scored;
    v1::Sample* s = scored.mutable_sample();
    s->mutable_key()->set_sample_id(absl::StrCat(item.job_id(), "/", item.group_id(), "/", index));
    s->mutable_key()->set_job_id(item.job_id());
    s->mutable_key()->set_group_id(item.group_id());
    s->mutable_key()->set_index_in_group(index);
    s->set_policy_version(item.min_policy_version());
    s->add_completion_tokens(1);
    s->add_completion_tokens(2);
    s->add_completion_logprobs(-0.5f);
    s->add_completion_logprobs(-0.5f);
    scored.mutable_verdict()->set_stage_reached(v1::STAGE_STATIC);
    return scored;
  };
  v1::DeliverSamplesRequest request;
  request.set_sender_id("raw-client");
  *request.add_samples() = sample(0);
  request.mutable_samples(0)->mutable_sample()->mutable_completion_logprobs()->RemoveLast();
  *request.add_samples() = sample(0);
  request.mutable_samples(1)->mutable_sample()->mutable_key()->set_index_in_group(7);
  *request.add_samples() = sample(0);
  request.mutable_samples(2)->mutable_sample()->mutable_key()->set_sample_id("someone-else/0");
  *request.add_samples() = sample(0);
  request.mutable_samples(3)->clear_verdict();
  *request.add_samples() = sample(0);  // valid
  *request.add_samples() = sample(0);  // the same again
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(10));
  v1::DeliverSamplesResponse response;
  ASSERT_TRUE(stub->DeliverSamples(&context, request, &response).ok());
  ASSERT_EQ(response.acks_size(), 6);
  const char* reasons[] = {"1 log-probs for 2 completion tokens", "index_in_group: 7 outside",
                           "do not match", "verdict: is required"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(response.acks(i).status(), v1::SampleAck::REJECTED) << i;
    EXPECT_THAT(response.acks(i).reason(), HasSubstr(reasons[i]));
  }
  EXPECT_EQ(response.acks(4).status(), v1::SampleAck::ACCEPTED) << response.acks(4).reason();
  EXPECT_EQ(response.acks(5).status(), v1::SampleAck::DUPLICATE);
  const int metrics = learner->ports.metrics_port();
  EXPECT_EQ(ScrapeMetric(metrics, kRejected), 4);
  EXPECT_EQ(ScrapeMetric(metrics, kAccepted), 1);
  EXPECT_EQ(ScrapeMetric(metrics, kDuplicate), 1);

  // The rejected ones took no slot: the rest of the group completes it.
  v1::DeliverSamplesRequest rest;
  for (int i = 1; i < item.group_size(); ++i) *rest.add_samples() = sample(i);
  grpc::ClientContext rest_context;
  SetDeadline(rest_context, absl::Seconds(10));
  ASSERT_TRUE(stub->DeliverSamples(&rest_context, rest, &response).ok());
  for (const v1::SampleAck& ack : response.acks()) {
    EXPECT_EQ(ack.status(), v1::SampleAck::ACCEPTED) << ack.reason();
  }
  EXPECT_TRUE(Eventually([&] { return ScrapeMetric(metrics, kCompleted) == 1; }, absl::Seconds(10)));
  EXPECT_TRUE(WaitForServing(MakeChannel(learner->address()), absl::Seconds(5)).ok());
  EXPECT_FALSE(learner->process->Poll().has_value()) << "learner exited";
}

// What a model may write that holds no code at all: nothing (it ended at
// once, no tokens), blanks, prose. Each goes through the real verifier,
// fails its first stage as "no code", reaches the learner as an ordinary
// scored sample, and is trained on; the verifier's deliveries and the
// learner's acks agree one for one.
TEST_F(MeshFaultTest, ACompletionWithoutCodeIsScoredDeliveredAndTrainedLikeAnyOther) {
  auto learner = StartLearner();
  ASSERT_TRUE(learner.ok()) << learner.status();
  auto verifier = StartVerifier("verifier", learner->address());
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  Connect(*learner);
  v1::JobSpec spec = testing::FastJobSpec(ModelDir());
  spec.mutable_grpo()->set_group_size(3);
  spec.set_total_steps(2);
  spec.mutable_optimizer()->set_batch_size(6);
  spec.mutable_optimizer()->set_micro_batch_size(6);
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto learner_stub = v1::LearnerService::NewStub(MakeChannel(learner->address()));
  auto verifier_stub = v1::VerifierService::NewStub(MakeChannel(verifier->address()));

  // This test is the rollout worker of the first step's groups.
  std::vector<v1::WorkItem> items;
  ASSERT_TRUE(Eventually(
      [&] {
        grpc::ClientContext context;
        SetDeadline(context, absl::Seconds(5));
        v1::TakeWorkRequest request;
        request.set_worker_id("odd-model");
        request.set_max_groups(spec.prompts_per_step() - static_cast<int>(items.size()));
        request.set_wait_ms(1000);
        v1::TakeWorkResponse response;
        if (!learner_stub->TakeWork(&context, request, &response).ok()) return false;
        items.insert(items.end(), response.items().begin(), response.items().end());
        return static_cast<int>(items.size()) == spec.prompts_per_step();
      },
      absl::Seconds(90)))
      << learner->Log();
  const char* completions[] = {"", "  \n\t\n", "I would rather not write a kernel today."};
  int verified = 0;
  for (const v1::WorkItem& item : items) {
    for (int index = 0; index < item.group_size(); ++index) {
      v1::VerifyRequest request;
      request.set_request_id(absl::StrCat(item.group_id(), "/", index));
      *request.mutable_task() = item.task();
      *request.mutable_options() = item.verifier();
      request.set_completion(completions[index % 3]);
      request.set_deliver_to_learner(true);
      v1::Sample* sample = request.mutable_sample();
      sample->mutable_key()->set_job_id(item.job_id());
      sample->mutable_key()->set_group_id(item.group_id());
      sample->mutable_key()->set_index_in_group(index);
      sample->mutable_key()->set_sample_id(
          absl::StrCat(item.job_id(), "/", item.group_id(), "/", index));
      sample->set_policy_version(item.min_policy_version());
      sample->set_prompt_text(item.prompt_text());
      *sample->mutable_prompt_tokens() = item.prompt_tokens();
      sample->set_completion_text(completions[index % 3]);
      // The empty answer has no tokens at all; the others a few.
      for (int t = 0; index % 3 != 0 && t < 3; ++t) {
        sample->add_completion_tokens(11 + t);
        sample->add_completion_logprobs(-1.0f);
      }
      grpc::ClientContext context;
      SetDeadline(context, absl::Seconds(60));
      v1::VerifyResponse response;
      const grpc::Status status = verifier_stub->Verify(&context, request, &response);
      ASSERT_TRUE(status.ok()) << index << ": " << status.error_message();
      const v1::Verdict& verdict = response.verdict();
      EXPECT_FALSE(verdict.correct()) << index;
      EXPECT_EQ(verdict.stage_reached(), v1::STAGE_STATIC) << index;
      ASSERT_GE(verdict.stages_size(), 1) << index;
      EXPECT_EQ(verdict.stages(0).outcome(), v1::OUTCOME_FAILED) << index;
      EXPECT_THAT(verdict.stages(0).message(), HasSubstr("no code")) << index;
      ++verified;
    }
  }
  const int lm = learner->ports.metrics_port();
  const int vm = verifier->ports.metrics_port();
  EXPECT_EQ(ScrapeMetric(lm, kAccepted), verified);
  EXPECT_EQ(ScrapeMetric(vm, R"(kforge_verifier_deliveries_total{result="accepted"})"), verified);
  // Every ack the learner gave, of any status, answers one delivery the
  // verifier counted (a series not yet exported counts 0).
  double acks = 0, deliveries = 0;
  for (const char* status : {"accepted", "duplicate", "stale", "orphaned", "rejected"}) {
    acks += std::max(0.0, ScrapeMetric(lm, absl::StrCat(R"(kforge_learner_samples_total{status=")",
                                                        status, R"("})")));
    deliveries += std::max(
        0.0, ScrapeMetric(vm, absl::StrCat(R"(kforge_verifier_deliveries_total{result=")", status,
                                           R"("})")));
  }
  EXPECT_EQ(acks, verified);
  EXPECT_EQ(deliveries, verified);
  ExpectLedgerBalances(lm);

  // The first step trains on those groups; a real worker samples the rest.
  ASSERT_GE(WaitForJob(job->id(), [](const v1::Job& j) { return j.progress().step() >= 1; },
                       absl::Seconds(90)).progress().step(), 1) << learner->Log();
  auto rollout = StartRollout("rollout-0", learner->address(), verifier->address());
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  const v1::Job final_job = WaitForJob(job->id(), Ended, absl::Seconds(120));
  ASSERT_EQ(final_job.state(), v1::JOB_SUCCEEDED) << final_job.message() << learner->Log();
  ExpectLedgerBalances(lm);
}

class VerifierFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string config = dir_.Sub("verifier.json");
    // The smallest message limit the config allows, so an oversized request
    // costs little to build.
    testing::WriteFile(config, absl::StrCat(R"({"work_dir": ")", dir_.Sub("work"),
                                            R"(", "max_concurrent": 1,
                                            "server": {"max_message_bytes": 4194304}})"));
    auto verifier = testing::StartServiceProcess("kforge-verifier", {"--config=" + config},
                                                 dir_.path());
    ASSERT_TRUE(verifier.ok()) << verifier.status();
    verifier_ = *std::move(verifier);
    stub_ = v1::VerifierService::NewStub(MakeChannel(verifier_.address()));
  }

  static v1::VerifyRequest Request(const std::string& id, bool slow) {
    v1::VerifyRequest request;
    request.set_request_id(id);
    request.mutable_task()->set_id("level1/1_ReLU");
    request.mutable_task()->set_reference_source(Source("tasks/kforge-mini/level1/1_ReLU.py"));
    request.set_completion(slow ? Source("tests/data/verifier/cpu/relu_clamp.py")
                                : "no code, only words");
    request.mutable_options()->set_require_triton(false);
    request.mutable_options()->set_use_cache(false);
    request.mutable_options()->mutable_timing()->set_enabled(false);
    return request;
  }

  // The verifier is SERVING and verifies a fresh candidate over a new stream.
  void ExpectStillVerifies() {
    EXPECT_TRUE(WaitForServing(MakeChannel(verifier_.address()), absl::Seconds(5)).ok());
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(60));
    auto stream = stub_->VerifyStream(&context);
    ASSERT_TRUE(stream->Write(Request("after", false)));
    stream->WritesDone();
    bool answered = false;
    for (v1::VerifyStreamResponse message; stream->Read(&message);) {
      if (message.has_result()) {
        answered = message.result().request_id() == "after";
        EXPECT_EQ(message.result().verdict().stage_reached(), v1::STAGE_STATIC);
      }
    }
    EXPECT_TRUE(stream->Finish().ok());
    EXPECT_TRUE(answered);
  }

  double Metric(const std::string& series) {
    return ScrapeMetric(verifier_.ports.metrics_port(), series);
  }

  testing::TempDir dir_;
  testing::ServiceProcess verifier_;
  std::unique_ptr<v1::VerifierService::Stub> stub_;
};

TEST_F(VerifierFaultTest, MalformedStreamRequestsAreRefusedWithReasonsAndCounted) {
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(60));
  auto stream = stub_->VerifyStream(&context);
  std::vector<v1::VerifyRequest> requests;
  requests.push_back(Request("", false));
  requests.push_back(Request("no-task", false));
  requests.back().clear_task();
  // An empty completion is a model's answer, not a malformed request: it is
  // taken and fails at the first stage (no code).
  requests.push_back(Request("no-completion", false));
  requests.back().clear_completion();
  requests.push_back(Request("twice", true));
  requests.push_back(Request("twice", true));
  requests.push_back(Request("good", false));
  for (const v1::VerifyRequest& r : requests) ASSERT_TRUE(stream->Write(r));
  stream->WritesDone();
  std::vector<v1::RequestAck> acks;
  std::vector<std::string> results;
  for (v1::VerifyStreamResponse message; stream->Read(&message);) {
    if (message.has_ack()) acks.push_back(message.ack());
    if (message.has_result()) results.push_back(message.result().request_id());
  }
  EXPECT_TRUE(stream->Finish().ok());
  ASSERT_EQ(acks.size(), requests.size());
  const char* reasons[] = {"request_id: is required", "task.reference_source: is required",
                           "", "", "duplicate request_id in flight", ""};
  for (size_t i = 0; i < acks.size(); ++i) {
    EXPECT_EQ(acks[i].accepted(), std::string(reasons[i]).empty()) << i;
    EXPECT_THAT(acks[i].reason(), HasSubstr(reasons[i])) << i;
  }
  EXPECT_THAT(results, ::testing::UnorderedElementsAre("no-completion", "twice", "good"));
  EXPECT_EQ(Metric(R"(kforge_verifier_stream_rejections_total{reason="invalid"})"), 2);
  EXPECT_EQ(Metric(R"(kforge_verifier_stream_rejections_total{reason="duplicate"})"), 1);
  EXPECT_THAT(verifier_.Log(), HasSubstr("stream request refused"));
  ExpectStillVerifies();
}

TEST_F(VerifierFaultTest, AClientThatHangsUpMidStreamIsCountedAndTheVerifierCarriesOn) {
  {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(60));
    auto stream = stub_->VerifyStream(&context);
    // Slow candidates, one verified at a time: most are still queued when
    // the client goes.
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(stream->Write(Request(absl::StrCat("h", i), true)));
    int acks = 0;
    for (v1::VerifyStreamResponse message; acks < 4 && stream->Read(&message);) {
      acks += message.has_ack() && message.ack().accepted() ? 1 : 0;
    }
    ASSERT_EQ(acks, 4);
    context.TryCancel();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The verifier finishes (or drops) what it had, then closes the call.
  EXPECT_TRUE(Eventually(
      [&] { return Metric("kforge_verifier_streams_cancelled_total") == 1; }, absl::Seconds(60)))
      << verifier_.Log();
  EXPECT_THAT(verifier_.Log(), HasSubstr("stream cancelled by the client"));
  EXPECT_EQ(Metric(R"(kforge_grpc_server_handled_total{grpc_code="CANCELLED",grpc_method="VerifyStream",grpc_service="kforge.v1.VerifierService"})"),
            1);
  ExpectStillVerifies();
}

TEST_F(VerifierFaultTest, AnOversizedOrEmptyTaskIsRefusedAndTheVerifierCarriesOn) {
  {
    // 5 MB of reference source, over the 4 MiB message limit: gRPC refuses
    // the message and ends the stream.
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(60));
    auto stream = stub_->VerifyStream(&context);
    v1::VerifyRequest big = Request("big", false);
    big.mutable_task()->set_reference_source(std::string(5 << 20, '#'));
    stream->Write(big);
    stream->WritesDone();
    for (v1::VerifyStreamResponse message; stream->Read(&message);) {
      EXPECT_FALSE(message.has_result()) << "an oversized request was verified";
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(30));
    v1::VerifyRequest empty = Request("empty", false);
    empty.mutable_task()->Clear();
    v1::VerifyResponse response;
    const grpc::Status status = stub_->Verify(&context, empty, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("task.reference_source"));
  }
  EXPECT_FALSE(verifier_.process->Poll().has_value()) << "verifier exited";
  ExpectStillVerifies();
}

// The load generator (bench/verify_stream_load.cc) on a small count: every
// request is answered exactly once. No timing is asserted.
TEST(VerifyStreamLoadTest, EveryRequestIsAnsweredOnce) {
  testing::TempDir dir;
  auto load = ChildProcess::Spawn(
      {.argv = {testing::BinaryPath("kforge_verify_stream_load"), "--samples=500", "--clients=8",
                "--check", "--work_dir=" + dir.path()},
       .capture_output = true});
  ASSERT_TRUE(load.ok()) << load.status();
  auto exit = (*load)->WaitFor(absl::Seconds(240));
  ASSERT_TRUE(exit.ok()) << (*load)->output();
  EXPECT_TRUE(exit->exited && exit->code == 0) << exit->Describe() << "\n" << (*load)->output();
  EXPECT_THAT((*load)->output(), HasSubstr("answered exactly once: 500 of 500"));
}

}  // namespace
}  // namespace kforge
