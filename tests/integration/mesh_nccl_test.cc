// The NCCL weight broadcast in a running mesh of real processes: the learner
// on cuda:0 and rollout workers on cuda:1, on a machine with two GPUs (the
// tests skip, saying why, elsewhere). An SFT job publishes a new policy
// version after every step; each is broadcast into the worker's live
// parameters, and the worker ends on the learner's last version. A member
// killed with SIGKILL does not stall the job: the group re-forms with the
// worker that was waiting for that GPU. That the received parameters equal
// the sent ones byte for byte is tests/unit/model/weights/nccl_communicator_test.cc.
#include <signal.h>

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/client/rpc_client.h"
#include "kforge/v1/job_service.grpc.pb.h"
#include "tests/support/fixtures.h"
#include "tests/support/mesh.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using testing::Eventually;
using testing::ScrapeMetric;

constexpr char kBroadcastsOk[] = R"(kforge_learner_weight_broadcasts_total{result="ok"})";
constexpr char kGeneration[] = "kforge_learner_broadcast_group_generation";
constexpr char kNcclUpdates[] = R"(kforge_rollout_weight_updates_total{path="nccl"})";
constexpr char kMember[] = "kforge_rollout_broadcast_member";

class MeshNcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!KFORGE_TEST_HAVE_NCCL) GTEST_SKIP() << "this build has no NCCL";
    if (testing::GpuCount() < 2) {
      GTEST_SKIP() << "needs two GPUs (learner and rollout worker on their own), has "
                   << testing::GpuCount();
    }
    ASSERT_TRUE(testing::WriteTinyModelDir(dir_.Sub("tiny")).ok());
  }

  absl::StatusOr<testing::ServiceProcess> StartLearner() {
    const std::string config = dir_.Sub("learner.json");
    testing::WriteFile(config, R"({"worker_timeout_s": 3, "heartbeat_interval_s": 1,
                                   "device": "cuda:0", "max_take_work_wait_s": 2,
                                   "broadcast_form_timeout_s": 20, "broadcast_timeout_s": 5})");
    return testing::StartServiceProcess(
        "kforge-learner",
        {"--config=" + config, "--state_dir=" + dir_.Sub("state"), "--port=0",
         "--model_roots=" + dir_.path()},
        dir_.path());
  }

  absl::StatusOr<testing::ServiceProcess> StartRollout(const std::string& name,
                                                       const std::string& learner) {
    const std::string config = dir_.Sub(name + ".json");
    testing::WriteFile(config, R"({"max_batch_sequences": 8, "take_work_wait_s": 1,
                                   "broadcast_grace_s": 2,
                                   "rpc": {"backoff_initial_s": 0.1, "backoff_max_s": 1}})");
    return testing::StartServiceProcess(
        "kforge-rollout",
        {"--config=" + config, "--learner=" + learner, "--verifiers=127.0.0.1:1",
         "--model=" + dir_.Sub("tiny"), "--name=" + name, "--device=cuda:1"},
        dir_.path());
  }

  // Supervised steps on the built-in reference solutions: every step
  // updates the policy, so every step publishes (and broadcasts) a version.
  v1::JobSpec SftSpec(int steps) {
    v1::JobSpec spec = testing::FastJobSpec(dir_.Sub("tiny"));
    spec.set_algorithm(v1::ALGORITHM_SFT);
    spec.set_total_steps(steps);
    spec.mutable_optimizer()->set_bf16(true);  // the worker's dtype on a GPU
    spec.mutable_checkpoint()->set_every_steps(steps);
    return spec;
  }

  static v1::Job Submit(const std::string& learner, const v1::JobSpec& spec) {
    auto jobs = v1::JobService::NewStub(MakeChannel(learner));
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(30));
    v1::Job job;
    const grpc::Status status = jobs->SubmitJob(&context, spec, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  // Polls the job until it ends (or 4 minutes pass); returns what was seen last.
  static v1::Job WaitForEnd(const std::string& learner, const std::string& id) {
    auto jobs = v1::JobService::NewStub(MakeChannel(learner));
    v1::Job job;
    Eventually(
        [&] {
          grpc::ClientContext context;
          SetDeadline(context, absl::Seconds(5));
          v1::GetJobRequest request;
          request.set_job_id(id);
          return jobs->GetJob(&context, request, &job).ok() &&
                 (job.state() == v1::JOB_SUCCEEDED || job.state() == v1::JOB_FAILED ||
                  job.state() == v1::JOB_CANCELLED);
        },
        absl::Seconds(240));
    return job;
  }

  testing::TempDir dir_;
};

TEST_F(MeshNcclTest, EveryVersionReachesAWorkerOnAnotherGpuByBroadcast) {
  auto learner = StartLearner();
  ASSERT_TRUE(learner.ok()) << learner.status();
  auto rollout = StartRollout("member", learner->address());
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  const int lm = learner->ports.metrics_port(), rm = rollout->ports.metrics_port();
  // The worker polls SyncBroadcast once registered; the group forms at the
  // job's first publish.
  const v1::Job job = WaitForEnd(learner->address(), Submit(learner->address(), SftSpec(12)).id());
  ASSERT_EQ(job.state(), v1::JOB_SUCCEEDED) << job.message() << learner->Log();
  EXPECT_GE(ScrapeMetric(lm, kBroadcastsOk), 10) << learner->Log() << rollout->Log();
  EXPECT_EQ(ScrapeMetric(lm, R"(kforge_learner_weight_broadcasts_total{result="failed"})"), 0);
  EXPECT_GE(ScrapeMetric(lm, R"(kforge_learner_broadcast_group_forms_total{result="ok"})"), 1);
  // The group ended with the job.
  EXPECT_EQ(ScrapeMetric(lm, "kforge_learner_broadcast_group_members"), 0);
  EXPECT_EQ(ScrapeMetric(rm, kMember), 1);
  EXPECT_GE(ScrapeMetric(rm, kNcclUpdates), 10) << rollout->Log();
  // The worker holds the learner's last version.
  ASSERT_TRUE(Eventually([&] {
    return ScrapeMetric(rm, "kforge_rollout_weight_version") ==
           ScrapeMetric(lm, "kforge_learner_policy_version");
  }, absl::Seconds(10))) << rollout->Log();
  EXPECT_EQ(ScrapeMetric(lm, "kforge_learner_policy_version"), 12);
}

TEST_F(MeshNcclTest, AKilledMemberDoesNotStallTheJobAndTheGroupReformsWithoutIt) {
  auto learner = StartLearner();
  ASSERT_TRUE(learner.ok()) << learner.status();
  // Both on cuda:1: only one can be in the group (a GPU per rank).
  auto first = StartRollout("first", learner->address());
  ASSERT_TRUE(first.ok()) << first.status();
  const int lm = learner->ports.metrics_port();
  const v1::Job job = Submit(learner->address(), SftSpec(400));
  ASSERT_TRUE(Eventually([&] { return ScrapeMetric(lm, kBroadcastsOk) >= 2; }, absl::Seconds(120)))
      << learner->Log() << first->Log();
  auto second = StartRollout("second", learner->address());
  ASSERT_TRUE(second.ok()) << second.status();
  const double generation = ScrapeMetric(lm, kGeneration);
  first->process->Signal(SIGKILL);
  ASSERT_TRUE(first->process->WaitFor(absl::Seconds(10)).ok());
  // The second worker takes the GPU's place in a re-formed group and
  // receives by broadcast from then on.
  EXPECT_TRUE(Eventually([&] { return ScrapeMetric(second->ports.metrics_port(), kNcclUpdates) >= 1; },
                         absl::Seconds(120)))
      << learner->Log() << second->Log();
  EXPECT_GT(ScrapeMetric(lm, kGeneration), generation);
  EXPECT_EQ(ScrapeMetric(second->ports.metrics_port(), kMember), 1);
  const v1::Job done = WaitForEnd(learner->address(), job.id());
  EXPECT_EQ(done.state(), v1::JOB_SUCCEEDED) << done.message() << learner->Log();
}

}  // namespace
}  // namespace kforge
