// The three service binaries, started for real on loopback: health,
// reflection, job submission and validation, metrics, drain.
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/client/rpc_client.h"
#include "common/process/child_process.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "kforge/v1/job_service.grpc.pb.h"
#include "kforge/v1/learner_service.grpc.pb.h"
#include "kforge/v1/verifier_service.grpc.pb.h"
#include "tests/support/fixtures.h"
#include "tests/support/reflection_client.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

class LearnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteCheckpointSkeleton(dir_.Sub("model"));
    testing::WriteTaskFolder(dir_.Sub("tasks"));
    auto learner = testing::StartServiceProcess(
        "kforge-learner", LearnerArgs(), dir_.path());
    ASSERT_TRUE(learner.ok()) << learner.status();
    learner_ = std::move(*learner);
    stub_ = v1::JobService::NewStub(MakeChannel(learner_.address()));
  }

  grpc::Status Submit(const v1::JobSpec& spec, v1::Job* job) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(10));
    return stub_->SubmitJob(&context, spec, job);
  }
  v1::JobSpec Valid() { return testing::ValidJobSpec(dir_.Sub("model"), dir_.Sub("tasks")); }
  // The test's folder holds the model and tasks the jobs read.
  std::vector<std::string> LearnerArgs() const {
    return {"--state_dir=" + dir_.Sub("state"), "--model_roots=" + dir_.path(),
            "--task_roots=" + dir_.path()};
  }

  testing::TempDir dir_;
  testing::ServiceProcess learner_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

TEST_F(LearnerTest, HealthIsServingForServerAndEachService) {
  auto channel = MakeChannel(learner_.address());
  EXPECT_TRUE(WaitForServing(channel, absl::Seconds(5), "").ok());
  EXPECT_TRUE(WaitForServing(channel, absl::Seconds(5), "kforge.v1.JobService").ok());
  EXPECT_TRUE(WaitForServing(channel, absl::Seconds(5), "kforge.v1.LearnerService").ok());
}

TEST_F(LearnerTest, ReflectionListsAndDescribesEveryService) {
  auto channel = MakeChannel(learner_.address());
  auto services = testing::ListServices(channel);
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, IsSupersetOf({"kforge.v1.JobService", "kforge.v1.LearnerService",
                                       "grpc.health.v1.Health",
                                       "grpc.reflection.v1alpha.ServerReflection"}));
  // What `grpcurl describe kforge.v1.JobSpec` needs: the defining file and
  // its imports.
  auto files = testing::FilesContainingSymbol(channel, "kforge.v1.JobSpec");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, Contains("kforge/v1/job.proto"));
}

TEST_F(LearnerTest, InvalidJobSpecsAreRejectedNamingTheFieldAndServerKeepsServing) {
  struct Case {
    std::function<void(v1::JobSpec&)> mutate;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](v1::JobSpec& s) { s.clear_model_path(); }, "spec.model_path: is required"},
      {[](v1::JobSpec& s) { s.mutable_grpo()->set_clip_low(1.5); },
       "spec.grpo.clip_low: 1.5 is above the maximum 1"},
      {[this](v1::JobSpec& s) { s.set_model_path(dir_.Sub("nonexistent")); },
       "spec.model_path: " + dir_.Sub("nonexistent") + ": not a directory"},
      {[this](v1::JobSpec& s) { s.mutable_tasks()->set_kernelbench_dir(dir_.Sub("none")); },
       "spec.tasks"},
  };
  for (const Case& c : cases) {
    v1::JobSpec spec = Valid();
    c.mutate(spec);
    v1::Job job;
    const grpc::Status status = Submit(spec, &job);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.expected;
    EXPECT_THAT(status.error_message(), HasSubstr(c.expected));
  }
  EXPECT_TRUE(WaitForServing(MakeChannel(learner_.address()), absl::Seconds(5)).ok());
  EXPECT_FALSE(learner_.process->Poll().has_value()) << "learner exited";
}

TEST_F(LearnerTest, ValidJobIsAcceptedListedWatchedAndCancelled) {
  v1::Job job;
  ASSERT_TRUE(Submit(Valid(), &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_QUEUED);
  EXPECT_EQ(job.spec().grpo().group_size(), 8) << "defaults are filled in";

  grpc::ClientContext list_context;
  SetDeadline(list_context, absl::Seconds(10));
  v1::ListJobsResponse list;
  ASSERT_TRUE(stub_->ListJobs(&list_context, v1::ListJobsRequest(), &list).ok());
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).id(), job.id());

  grpc::ClientContext watch_context;
  SetDeadline(watch_context, absl::Seconds(30));
  v1::WatchJobRequest watch;
  watch.set_job_id(job.id());
  auto reader = stub_->WatchJob(&watch_context, watch);
  v1::JobEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.state_changed(), v1::JOB_QUEUED);

  grpc::ClientContext cancel_context;
  SetDeadline(cancel_context, absl::Seconds(10));
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  v1::Job cancelled;
  ASSERT_TRUE(stub_->CancelJob(&cancel_context, cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), v1::JOB_CANCELLED);

  v1::JobEvent last;
  while (reader->Read(&event)) last = event;
  EXPECT_TRUE(reader->Finish().ok()) << "the watch ends when the job ends";
  EXPECT_EQ(last.state_changed(), v1::JOB_CANCELLED);
}

TEST_F(LearnerTest, UnknownJobIsNotFound) {
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(10));
  v1::GetJobRequest request;
  request.set_job_id("job-424242");
  v1::Job job;
  const grpc::Status status = stub_->GetJob(&context, request, &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("job-424242"));
}

TEST_F(LearnerTest, MetricsParseAndCountCallsByCode) {
  v1::Job job;
  v1::JobSpec bad = Valid();
  bad.clear_model_path();
  ASSERT_FALSE(Submit(bad, &job).ok());
  ASSERT_TRUE(Submit(Valid(), &job).ok());
  absl::StatusOr<std::string> response = testing::HttpGet(learner_.ports.metrics_port(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_THAT(*response, HasSubstr("200 OK"));
  EXPECT_THAT(*response, HasSubstr("kforge_learner_jobs_submitted_total 1"));
  EXPECT_THAT(*response, HasSubstr("kforge_learner_jobs_rejected_total 1"));
  EXPECT_THAT(*response, HasSubstr(R"(kforge_grpc_server_handled_total{grpc_code="INVALID_ARGUMENT",grpc_method="SubmitJob",grpc_service="kforge.v1.JobService"} 1)"));
  EXPECT_THAT(*response, HasSubstr("kforge_ready 1"));
  EXPECT_THAT(*response, HasSubstr("kforge_grpc_server_handling_seconds_bucket"));
}

// `promtool check metrics` (Debian package prometheus) lints the names,
// units and types of everything a process exports at `metrics_port`.
void ExpectPromtoolAccepts(int metrics_port, const std::string& scratch) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian package prometheus)";
  }
  auto body = testing::HttpGet(metrics_port, "/metrics");
  ASSERT_TRUE(body.ok());
  testing::WriteFile(scratch, body->substr(body->find("\r\n\r\n") + 4));
  auto promtool = ChildProcess::Spawn(
      {.argv = {"/bin/sh", "-c", "promtool check metrics < " + scratch}, .capture_output = true});
  ASSERT_TRUE(promtool.ok());
  auto exit = (*promtool)->WaitFor(absl::Seconds(60));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 0) << (*promtool)->output();
}

TEST_F(LearnerTest, PromtoolAcceptsMetrics) {
  v1::Job job;
  ASSERT_TRUE(Submit(Valid(), &job).ok());
  ExpectPromtoolAccepts(learner_.ports.metrics_port(), dir_.Sub("learner-metrics.txt"));
}

TEST_F(LearnerTest, JobsSurviveARestart) {
  v1::Job job;
  ASSERT_TRUE(Submit(Valid(), &job).ok());
  learner_.process->Terminate(absl::Seconds(15));
  auto restarted = testing::StartServiceProcess(
      "kforge-learner", LearnerArgs(), dir_.path());
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  auto stub = v1::JobService::NewStub(MakeChannel(restarted->address()));
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(10));
  v1::GetJobRequest request;
  request.set_job_id(job.id());
  v1::Job again;
  ASSERT_TRUE(stub->GetJob(&context, request, &again).ok());
  // The trainer may have taken it up (this fixture's model folder has no
  // weights, so it fails, with the reason); either way the record is back.
  EXPECT_NE(again.state(), v1::JOB_STATE_UNSPECIFIED);
  EXPECT_EQ(again.created_at_us(), job.created_at_us());
  EXPECT_EQ(again.spec().name(), "test job");
}

TEST_F(LearnerTest, SigtermDrainsAndExitsZero) {
  learner_.process->Signal(SIGTERM);
  auto exit = learner_.process->WaitFor(absl::Seconds(30));
  ASSERT_TRUE(exit.ok());
  EXPECT_TRUE(exit->exited);
  EXPECT_EQ(exit->code, 0);
  EXPECT_THAT(learner_.Log(), HasSubstr("msg=stopped"));
}

TEST_F(LearnerTest, RolloutWorkerRegistersAndReportsServing) {
  auto rollout = testing::StartServiceProcess(
      "kforge-rollout", {"--learner=" + learner_.address(), "--name=test-worker"}, dir_.path());
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  auto metrics = testing::HttpGet(learner_.ports.metrics_port(), "/metrics");
  EXPECT_THAT(*metrics, HasSubstr("kforge_learner_workers 1"));
  EXPECT_THAT(rollout->Log(), HasSubstr("msg=registered"));
  // Reflection on the worker too (health and reflection only, for now).
  auto services = testing::ListServices(MakeChannel(rollout->address()));
  ASSERT_TRUE(services.ok());
  EXPECT_THAT(*services, Contains("grpc.health.v1.Health"));
}

TEST_F(LearnerTest, RolloutWorkerWithAModelLoadsItRegistersAndExportsRolloutMetrics) {
  auto tiny = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "tiny-model",
                                            dir_.Sub("tiny")},
                                   .capture_output = true});
  ASSERT_TRUE(tiny.ok());
  auto made = (*tiny)->WaitFor(absl::Seconds(120));
  ASSERT_TRUE(made.ok() && made->code == 0) << (*tiny)->output();
  auto rollout = testing::StartServiceProcess(
      "kforge-rollout", {"--learner=" + learner_.address(), "--model=" + dir_.Sub("tiny")},
      dir_.path());
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  EXPECT_THAT(rollout->Log(), HasSubstr("msg=\"model loaded\""));
  auto metrics = testing::HttpGet(rollout->ports.metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  // 64 slots of 4096 tokens: the configured defaults.
  EXPECT_THAT(*metrics, HasSubstr("kforge_rollout_kv_cache_capacity_tokens 262144"));
  EXPECT_THAT(*metrics, HasSubstr("kforge_rollout_samples_total{event=\"answered\"} 0"));
  EXPECT_THAT(*metrics, HasSubstr("kforge_rollout_decode_step_runs_total{mode=\"graph\"} 0"));
  EXPECT_THAT(*metrics, HasSubstr("kforge_rollout_decode_graphs 0"));
  // No GPU here: the worker says why its decode steps run eagerly.
  EXPECT_THAT(rollout->Log(), HasSubstr("decode steps run eagerly"));
  EXPECT_THAT(rollout->Log(), HasSubstr("not a CUDA device"));
  ExpectPromtoolAccepts(rollout->ports.metrics_port(), dir_.Sub("rollout-metrics.txt"));
}

TEST_F(LearnerTest, WorkAndSampleDeliveryAnswerAndAreCounted) {
  auto stub = v1::LearnerService::NewStub(MakeChannel(learner_.address()));
  {
    // No job is running: the long poll ends empty, within its deadline.
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(10));
    v1::TakeWorkRequest request;
    request.set_worker_id("worker-x");
    request.set_max_groups(2);
    request.set_wait_ms(200);
    v1::TakeWorkResponse response;
    ASSERT_TRUE(stub->TakeWork(&context, request, &response).ok());
    EXPECT_EQ(response.items_size(), 0);
  }
  {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(10));
    v1::TakeWorkRequest request;
    v1::TakeWorkResponse response;
    const grpc::Status status = stub->TakeWork(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("worker_id"));
  }
  for (const auto& [worker, group, code, says] :
       std::vector<std::tuple<std::string, std::string, grpc::StatusCode, std::string>>{
           {"", "g", grpc::StatusCode::INVALID_ARGUMENT, "worker_id"},
           {"worker-x", "", grpc::StatusCode::INVALID_ARGUMENT, "group_id"},
           {"worker-x", "never-issued", grpc::StatusCode::NOT_FOUND, "never-issued"}}) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(10));
    v1::ReleaseWorkRequest request;
    request.set_worker_id(worker);
    request.set_group_id(group);
    v1::ReleaseWorkResponse response;
    const grpc::Status status = stub->ReleaseWork(&context, request, &response);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(says));
  }
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(10));
  v1::DeliverSamplesRequest request;
  v1::SampleKey* key = request.add_samples()->mutable_sample()->mutable_key();
  key->set_sample_id("job-9/g/0");
  key->set_job_id("job-9");
  key->set_group_id("g");
  request.add_samples();  // no id at all
  v1::DeliverSamplesResponse response;
  ASSERT_TRUE(stub->DeliverSamples(&context, request, &response).ok());
  ASSERT_EQ(response.acks_size(), 2);
  EXPECT_EQ(response.acks(0).status(), v1::SampleAck::ORPHANED);
  EXPECT_EQ(response.acks(1).status(), v1::SampleAck::REJECTED);
  EXPECT_THAT(response.acks(1).reason(), HasSubstr("sample_id"));
  auto metrics = testing::HttpGet(learner_.ports.metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(*metrics, HasSubstr("kforge_learner_samples_total{status=\"orphaned\"} 1"));
  EXPECT_THAT(*metrics, HasSubstr("kforge_learner_samples_total{status=\"rejected\"} 1"));
}

TEST_F(LearnerTest, AVerifierDeliversTheScoredSampleBeforeItAnswers) {
  auto verifier = testing::StartServiceProcess(
      "kforge-verifier", {"--learner=" + learner_.address()}, dir_.path());
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  auto stub = v1::VerifierService::NewStub(MakeChannel(verifier->address()));
  v1::VerifyRequest request;
  request.set_request_id("job-9/g/0");
  request.mutable_task()->set_reference_source(
      "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
      "        return torch.relu(x)\ndef get_inputs():\n    return [torch.randn(4)]\n"
      "def get_init_inputs():\n    return []\n");
  request.set_completion("no code here");
  request.mutable_options()->set_require_triton(false);
  v1::SampleKey* key = request.mutable_sample()->mutable_key();
  key->set_sample_id("job-9/g/0");
  key->set_job_id("job-9");
  key->set_group_id("g");
  request.set_deliver_to_learner(true);
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(60));
  v1::VerifyResponse response;
  ASSERT_TRUE(stub->Verify(&context, request, &response).ok());
  // By the time the verdict is back, the learner has answered: no job holds
  // group g, so the sample is counted as orphaned.
  auto learner_metrics = testing::HttpGet(learner_.ports.metrics_port(), "/metrics");
  EXPECT_THAT(*learner_metrics, HasSubstr("kforge_learner_samples_total{status=\"orphaned\"} 1"));
  auto verifier_metrics = testing::HttpGet(verifier->ports.metrics_port(), "/metrics");
  EXPECT_THAT(*verifier_metrics, HasSubstr("kforge_verifier_deliveries_total{result=\"orphaned\"} 1"));
  ExpectPromtoolAccepts(verifier->ports.metrics_port(), dir_.Sub("verifier-metrics.txt"));
  ExpectPromtoolAccepts(learner_.ports.metrics_port(), dir_.Sub("learner-metrics.txt"));
}

TEST(RolloutWorkerTest, AModelThatDoesNotLoadIsAConfigErrorNamingTheFile) {
  auto rollout = ChildProcess::Spawn(
      {.argv = {testing::BinaryPath("kforge-rollout"), "--port=0", "--model=/nonexistent/model"},
       .capture_output = true});
  ASSERT_TRUE(rollout.ok());
  auto exit = (*rollout)->WaitFor(absl::Seconds(30));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->code, 2);
  EXPECT_THAT((*rollout)->output(), HasSubstr("/nonexistent/model/config.json"));
}

TEST(RolloutWorkerTest, NotServingWithoutALearner) {
  testing::TempDir dir;
  auto rollout = testing::StartServiceProcess("kforge-rollout", {"--learner=127.0.0.1:1"},
                                              dir.path(), /*wait_serving=*/false);
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  const absl::Status serving =
      WaitForServing(MakeChannel(rollout->address()), absl::Seconds(2));
  EXPECT_EQ(serving.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(serving.message()), HasSubstr("NOT_SERVING"));
}

TEST(VerifierTest, ServesHealthAndReflectionOnceItsPythonIsChecked) {
  testing::TempDir dir;
  auto verifier = testing::StartServiceProcess("kforge-verifier", {}, dir.path());
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  auto services = testing::ListServices(MakeChannel(verifier->address()));
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, IsSupersetOf({"kforge.v1.VerifierService", "grpc.health.v1.Health"}));
  EXPECT_THAT(verifier->Log(), HasSubstr("python ready"));
}

// The verifier checks its interpreter before it listens, so a verifier that
// answers is one that can verify.
TEST(VerifierTest, BadPythonExitsWithConfigErrorNamingIt) {
  auto verifier = ChildProcess::Spawn(
      {.argv = {testing::BinaryPath("kforge-verifier"), "--port=0", "--python=/nonexistent/py"},
       .capture_output = true});
  ASSERT_TRUE(verifier.ok());
  auto exit = (*verifier)->WaitFor(absl::Seconds(30));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 2);
  EXPECT_THAT((*verifier)->output(), HasSubstr("/nonexistent/py: not an executable file"));
}

// --max_concurrent, --spare_sandboxes and --reference_cache_gib bypass the
// config's range checks and are held to the same bounds.
TEST(VerifierTest, OutOfRangeSlotFlagsExitWithConfigErrorNamingThem) {
  for (const auto& [flag, message] :
       std::vector<std::pair<std::string, std::string>>{
           {"--max_concurrent=0", "--max_concurrent: 0 is not in 1..1024"},
           {"--spare_sandboxes=-2", "--spare_sandboxes: -2 is not in 0..256"},
           {"--reference_cache_gib=5000", "--reference_cache_gib: 5000 is not in 0..4096"}}) {
    auto verifier = ChildProcess::Spawn(
        {.argv = {testing::BinaryPath("kforge-verifier"), "--port=0", flag},
         .capture_output = true});
    ASSERT_TRUE(verifier.ok());
    auto exit = (*verifier)->WaitFor(absl::Seconds(30));
    ASSERT_TRUE(exit.ok());
    EXPECT_EQ(exit->code, 2) << flag;
    EXPECT_THAT((*verifier)->output(), HasSubstr(message));
  }
}

// kforge local sizes each verifier's reference cache on a GPU node with
// --reference_cache_gib: it reaches the funnel as bytes.
TEST(VerifierTest, ReferenceCacheFlagSetsTheFunnelsCache) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("verifier.json"),
                     absl::StrCat(R"({"work_dir": ")", dir.Sub("work"), R"("})"));
  auto verifier = ChildProcess::Spawn(
      {.argv = {testing::BinaryPath("kforge-verifier"), "--config=" + dir.Sub("verifier.json"),
                "--port=0", "--metrics_port=0", "--reference_cache_gib=3"},
       .capture_output = true});
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while ((*verifier)->output().find("funnel ready") == std::string::npos &&
         absl::Now() < deadline) {
    auto exit = (*verifier)->WaitFor(absl::Milliseconds(200));
    ASSERT_FALSE(exit.ok()) << "the verifier exited: " << (*verifier)->output();
  }
  (*verifier)->Terminate(absl::Seconds(10));
  EXPECT_THAT((*verifier)->output(),
              ::testing::ContainsRegex("funnel ready[^\n]* reference_cache_bytes=3221225472"));
}

TEST(ConfigTest, UnknownConfigFieldExitsWithCode2NamingIt) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("learner.json"), R"({"server": {"prot": 1}})");
  auto child = ChildProcess::Spawn(
      {.argv = {testing::BinaryPath("kforge-learner"), "--config=" + dir.Sub("learner.json")},
       .capture_output = true});
  ASSERT_TRUE(child.ok());
  auto exit = (*child)->WaitFor(absl::Seconds(30));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 2);
  EXPECT_THAT((*child)->output(), HasSubstr("prot"));
  EXPECT_THAT((*child)->output(), HasSubstr("learner.json"));
}

}  // namespace
}  // namespace kforge
