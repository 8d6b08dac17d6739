// Transport security and authentication of the real binaries over real TLS
// on loopback, with certificates made at test time by
// deploy/tls/make-certs.sh (openssl): who may call JobService (a bearer
// token), who may call LearnerService and VerifierService (mesh peers: a
// client certificate from the mesh CA or a service token), what clients
// refuse, and that renewed certificates and tokens apply without a restart.
#include <signal.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/client/rpc_client.h"
#include "common/config/json_config.h"
#include "common/process/child_process.h"
#include "common/security/channel_security.h"
#include "kforge/v1/job_service.grpc.pb.h"
#include "kforge/v1/learner_service.grpc.pb.h"
#include "kforge/v1/verifier_service.grpc.pb.h"
#include "tests/support/fixtures.h"
#include "tests/support/mesh.h"
#include "tests/support/reflection_client.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tls_fixture.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using ::testing::Not;

ChannelSecurity Client(const v1::TlsConfig& tls, const std::string& token_file = "") {
  std::vector<std::string> tokens;
  if (!token_file.empty()) tokens.push_back(token_file);
  absl::StatusOr<ChannelSecurity> security = ChannelSecurity::Create(tls, tokens, absl::Seconds(0.1));
  EXPECT_TRUE(security.ok()) << security.status();
  return security.ok() ? *security : ChannelSecurity();
}

// A learner serving TLS (client certificates asked for, not required), two
// user tokens and a service token, files checked for changes every 0.2 s
// (tokens) and 1 s (certificates), and a plaintext probe port.
class SecureLearnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.Issue("learner", {"localhost", "127.0.0.1"}).ok());
    ASSERT_TRUE(pki_.Issue("rollout").ok());
    ASSERT_TRUE(rogue_.Issue("rollout").ok());
    testing::WriteFile(dir_.Sub("job-tokens"),
                       absl::StrCat("# users, one per line\n", user_token_, "\n", second_token_, "\n"));
    testing::WriteFile(dir_.Sub("service-tokens"), service_token_ + "\n");
    testing::WriteFile(dir_.Sub("wrong-token"), testing::RandomToken() + "\n");
    testing::WriteFile(dir_.Sub("user-token"), user_token_ + "\n");
    testing::WriteFile(dir_.Sub("second-token"), second_token_ + "\n");
    testing::WriteFile(dir_.Sub("service-token"), service_token_ + "\n");
    v1::LearnerConfig config;
    *config.mutable_server()->mutable_tls() = pki_.Tls("learner");
    config.mutable_server()->mutable_tls()->set_client_certs("optional");
    config.mutable_server()->mutable_tls()->set_reload_interval_s(1);
    config.mutable_server()->mutable_auth()->add_job_token_files(dir_.Sub("job-tokens"));
    config.mutable_server()->mutable_auth()->add_service_token_files(dir_.Sub("service-tokens"));
    config.mutable_server()->mutable_auth()->set_reload_interval_s(0.2);
    config.mutable_server()->set_probe_port(0);
    testing::WriteFile(dir_.Sub("learner.json"), ToJson(config));
    auto learner = testing::StartServiceProcess(
        "kforge-learner", {"--config=" + dir_.Sub("learner.json"), "--state_dir=" + dir_.Sub("state")},
        dir_.path(), /*wait_serving=*/false);
    ASSERT_TRUE(learner.ok()) << learner.status();
    learner_ = std::move(*learner);
    ASSERT_TRUE(WaitForServing(Connect(User()), absl::Seconds(60)).ok()) << learner_.Log();
  }

  v1::TlsConfig ServerOnly(const testing::TestPki& pki) const {
    v1::TlsConfig tls;
    tls.set_ca_file(pki.ca());
    return tls;
  }
  // A user: TLS against the mesh CA, no client certificate.
  ChannelSecurity User(const std::string& token_file = "") const {
    return Client(ServerOnly(pki_), token_file);
  }
  std::shared_ptr<grpc::Channel> Connect(const ChannelSecurity& security) const {
    return security.Connect(learner_.address());
  }

  grpc::Status ListJobs(const ChannelSecurity& security) const {
    auto stub = v1::JobService::NewStub(Connect(security));
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(10));
    v1::ListJobsResponse response;
    return stub->ListJobs(&context, v1::ListJobsRequest(), &response);
  }
  grpc::Status Register(const ChannelSecurity& security) const {
    auto stub = v1::LearnerService::NewStub(Connect(security));
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(10));
    v1::RegisterWorkerRequest request;
    request.set_worker_name("test-worker");
    v1::RegisterWorkerResponse response;
    return stub->RegisterWorker(&context, request, &response);
  }

  testing::TempDir dir_;
  testing::TestPki pki_{dir_.Sub("pki")};
  testing::TestPki rogue_{dir_.Sub("rogue")};
  const std::string user_token_ = testing::RandomToken();
  const std::string second_token_ = testing::RandomToken();
  const std::string service_token_ = testing::RandomToken();
  testing::ServiceProcess learner_;
};

TEST_F(SecureLearnerTest, JobServiceWantsATokenUnauthenticatedWithoutOneDeniedForAWrongOne) {
  const grpc::Status none = ListJobs(User());
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(none.error_message(), HasSubstr("needs a bearer token"));
  const grpc::Status wrong = ListJobs(User(dir_.Sub("wrong-token")));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(ListJobs(User(dir_.Sub("user-token"))).ok());
  // Two tokens at once: the rotation window.
  EXPECT_TRUE(ListJobs(User(dir_.Sub("second-token"))).ok());
  // The service token is for the mesh, not for jobs.
  EXPECT_EQ(ListJobs(User(dir_.Sub("service-token"))).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(SecureLearnerTest, EveryJobServiceMethodIsGuarded) {
  auto stub = v1::JobService::NewStub(Connect(User()));
  std::vector<grpc::Status> statuses;
  {
    grpc::ClientContext c;
    v1::Job job;
    statuses.push_back(stub->SubmitJob(&c, v1::JobSpec(), &job));
  }
  {
    grpc::ClientContext c;
    v1::GetJobRequest r;
    r.set_job_id("job-000001");
    v1::Job job;
    statuses.push_back(stub->GetJob(&c, r, &job));
  }
  {
    grpc::ClientContext c;
    v1::CancelJobRequest r;
    r.set_job_id("job-000001");
    v1::Job job;
    statuses.push_back(stub->CancelJob(&c, r, &job));
  }
  {
    grpc::ClientContext c;
    v1::WatchJobRequest r;
    r.set_job_id("job-000001");
    auto reader = stub->WatchJob(&c, r);
    v1::JobEvent event;
    while (reader->Read(&event)) {
    }
    statuses.push_back(reader->Finish());
  }
  for (const grpc::Status& s : statuses) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  }
}

TEST_F(SecureLearnerTest, HealthAndReflectionNeedNoToken) {
  auto channel = Connect(User());
  EXPECT_TRUE(WaitForServing(channel, absl::Seconds(5), "kforge.v1.JobService").ok());
  auto services = testing::ListServices(channel);
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, IsSupersetOf({"kforge.v1.JobService", "grpc.health.v1.Health"}));
}

TEST_F(SecureLearnerTest, ClientsRefuseAPlaintextTalkAnUnknownCaAndAWrongName) {
  // Plaintext to a TLS port: no answer at all.
  EXPECT_EQ(ListJobs(ChannelSecurity()).error_code(), grpc::StatusCode::UNAVAILABLE);
  // The rogue CA did not sign the learner's certificate.
  EXPECT_EQ(ListJobs(Client(ServerOnly(rogue_), dir_.Sub("user-token"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // Signed by the right CA, but not for this name.
  v1::TlsConfig wrong_name = ServerOnly(pki_);
  wrong_name.set_server_name("kforge-verifier");
  EXPECT_EQ(ListJobs(Client(wrong_name, dir_.Sub("user-token"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecureLearnerTest, LearnerServiceTakesMeshPeersOnly) {
  const grpc::Status anonymous = Register(User());
  EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(anonymous.error_message(), HasSubstr("mesh"));
  EXPECT_EQ(Register(User(dir_.Sub("user-token"))).error_code(),
            grpc::StatusCode::PERMISSION_DENIED)
      << "a user's token does not open the internal service";
  EXPECT_TRUE(Register(Client(pki_.Tls("rollout"))).ok()) << "mutual TLS";
  EXPECT_TRUE(Register(User(dir_.Sub("service-token"))).ok()) << "a service token";
  // A certificate from another CA fails the handshake itself.
  v1::TlsConfig rogue = rogue_.Tls("rollout");
  rogue.set_ca_file(pki_.ca());
  EXPECT_EQ(Register(Client(rogue)).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecureLearnerTest, ARotatedTokenFileAppliesWithoutARestart) {
  const std::string next = testing::RandomToken();
  testing::WriteFile(dir_.Sub("next-token"), next + "\n");
  EXPECT_EQ(ListJobs(User(dir_.Sub("next-token"))).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  testing::WriteFile(dir_.Sub("job-tokens"), next + "\n");
  EXPECT_TRUE(testing::Eventually([&] { return ListJobs(User(dir_.Sub("next-token"))).ok(); },
                                  absl::Seconds(10)));
  EXPECT_EQ(ListJobs(User(dir_.Sub("user-token"))).error_code(),
            grpc::StatusCode::PERMISSION_DENIED)
      << "the removed token no longer opens JobService";
  EXPECT_THAT(learner_.Log(), HasSubstr("token files reloaded"));
}

TEST_F(SecureLearnerTest, ARenewedCertificateIsServedWithoutARestart) {
  // The learner moves to a certificate of a new CA, in place (as a
  // Kubernetes Secret update does); clients that trust the new CA get in.
  testing::TestPki renewed(dir_.Sub("renewed"));
  ASSERT_TRUE(renewed.Issue("learner", {"localhost", "127.0.0.1"}).ok());
  const ChannelSecurity trusts_new = Client(ServerOnly(renewed), dir_.Sub("user-token"));
  EXPECT_EQ(ListJobs(trusts_new).error_code(), grpc::StatusCode::UNAVAILABLE);
  std::filesystem::copy_file(renewed.cert("learner"), pki_.cert("learner"),
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(renewed.key("learner"), pki_.key("learner"),
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_TRUE(testing::Eventually([&] { return ListJobs(trusts_new).ok(); }, absl::Seconds(15)));
  EXPECT_FALSE(learner_.process->Poll().has_value()) << "no restart";
}

TEST_F(SecureLearnerTest, TokensNeverReachTheLog) {
  ASSERT_EQ(ListJobs(User(dir_.Sub("wrong-token"))).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(ListJobs(User(dir_.Sub("user-token"))).ok());
  ASSERT_TRUE(Register(User(dir_.Sub("service-token"))).ok());
  const std::string log = learner_.Log();
  EXPECT_THAT(log, HasSubstr("a bearer token (2 accepted)"));
  for (const std::string& token : {user_token_, second_token_, service_token_}) {
    EXPECT_THAT(log, Not(HasSubstr(token)));
  }
  EXPECT_THAT(log, Not(HasSubstr(*ReadFileToString(dir_.Sub("wrong-token")))));
}

TEST_F(SecureLearnerTest, ThePlaintextProbePortAnswersHealthAndNothingElse) {
  ASSERT_GT(learner_.ports.probe_port(), 0);
  const std::string probe = absl::StrCat("127.0.0.1:", learner_.ports.probe_port());
  EXPECT_TRUE(WaitForServing(MakeChannel(probe), absl::Seconds(5)).ok());
  // Even a valid token does not reach JobService in plaintext: it is not
  // served there at all.
  auto stub = v1::JobService::NewStub(Client(v1::TlsConfig(), dir_.Sub("user-token")).Connect(probe));
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(10));
  v1::ListJobsResponse response;
  const grpc::Status status = stub->ListJobs(&context, v1::ListJobsRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(SecureLearnerTest, RefusalsAreCounted) {
  ASSERT_EQ(ListJobs(User()).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_EQ(ListJobs(User(dir_.Sub("wrong-token"))).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  const int port = learner_.ports.metrics_port();
  EXPECT_EQ(testing::ScrapeMetric(port, R"(kforge_grpc_auth_refused_total{code="UNAUTHENTICATED",service="kforge.v1.JobService"})"), 1);
  EXPECT_EQ(testing::ScrapeMetric(port, R"(kforge_grpc_auth_refused_total{code="PERMISSION_DENIED",service="kforge.v1.JobService"})"), 1);
}

// Exit code and output of a binary that is expected not to start.
std::pair<int, std::string> RunToExit(std::vector<std::string> argv) {
  auto child = ChildProcess::Spawn({.argv = std::move(argv), .capture_output = true});
  EXPECT_TRUE(child.ok());
  if (!child.ok()) return {-1, ""};
  auto exit = (*child)->WaitFor(absl::Seconds(60));
  EXPECT_TRUE(exit.ok()) << (*child)->output();
  return {exit.ok() ? exit->code : -1, (*child)->output()};
}

TEST(ServerSecurityTest, AnOpenJobServiceOnANonLoopbackAddressRefusesToStart) {
  testing::TempDir dir;
  const auto [code, output] =
      RunToExit({testing::BinaryPath("kforge-learner"), "--host=0.0.0.0", "--port=0",
                 "--metrics_port=0", "--state_dir=" + dir.Sub("state")});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(output, HasSubstr("server.auth.job_token_files"));
  EXPECT_THAT(output, HasSubstr("would accept anyone on 0.0.0.0"));
}

TEST(ServerSecurityTest, TlsFilesAreCheckedAtStartNamingTheField) {
  testing::TempDir dir;
  testing::TestPki pki(dir.Sub("pki"));
  ASSERT_TRUE(pki.Issue("a").ok());
  ASSERT_TRUE(pki.Issue("b").ok());
  v1::LearnerConfig config;
  *config.mutable_server()->mutable_tls() = pki.Tls("a");
  config.mutable_server()->mutable_tls()->set_key_file(pki.key("b"));
  testing::WriteFile(dir.Sub("learner.json"), ToJson(config));
  const auto [code, output] =
      RunToExit({testing::BinaryPath("kforge-learner"), "--config=" + dir.Sub("learner.json"),
                 "--port=0", "--metrics_port=0", "--state_dir=" + dir.Sub("state")});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(output, HasSubstr("server.tls.key_file: " + pki.key("b") + " is not the key of"));
}

TEST(ServerSecurityTest, ATokenIsNeverSentInPlaintextBeyondLoopback) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("token"), testing::RandomToken());
  const auto [code, output] =
      RunToExit({testing::BinaryPath("kforge"), "jobs", "--server=10.1.2.3:50051",
                 "--token_file=" + dir.Sub("token")});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(output, HasSubstr("must not travel in plaintext"));
}

TEST(ServerSecurityTest, VerifierServiceTakesMeshPeersOnly) {
  testing::TempDir dir;
  testing::TestPki pki(dir.Sub("pki"));
  ASSERT_TRUE(pki.Issue("verifier", {"127.0.0.1"}).ok());
  ASSERT_TRUE(pki.Issue("rollout").ok());
  v1::VerifierWorkerConfig config;
  *config.mutable_server()->mutable_tls() = pki.Tls("verifier");
  config.mutable_server()->mutable_tls()->set_client_certs("optional");
  testing::WriteFile(dir.Sub("verifier.json"), ToJson(config));
  auto verifier = testing::StartServiceProcess(
      "kforge-verifier", {"--config=" + dir.Sub("verifier.json")}, dir.path(), false);
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  v1::TlsConfig server_only;
  server_only.set_ca_file(pki.ca());
  ASSERT_TRUE(WaitForServing(Client(server_only).Connect(verifier->address()), absl::Seconds(120))
                  .ok())
      << verifier->Log();
  const auto verify = [&](const ChannelSecurity& security) {
    auto stub = v1::VerifierService::NewStub(security.Connect(verifier->address()));
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(30));
    v1::VerifyResponse response;
    return stub->Verify(&context, v1::VerifyRequest(), &response);
  };
  EXPECT_EQ(verify(Client(server_only)).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Past the guard, the empty request is refused for what it is.
  EXPECT_EQ(verify(Client(pki.Tls("rollout"))).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Candidates run with the key's folder hidden from them (Landlock), and a
  // correct one still verifies: the hiding spares what candidates need.
  v1::VerifyRequest request;
  request.mutable_task()->set_reference_source(
      *ReadFileToString(std::string(KFORGE_TEST_SOURCE_DIR) + "/tasks/kforge-mini/level1/1_ReLU.py"));
  request.set_completion(*ReadFileToString(std::string(KFORGE_TEST_SOURCE_DIR) +
                                           "/tests/data/verifier/cpu/kb_relu.py"));
  request.mutable_options()->set_require_triton(false);
  auto stub = v1::VerifierService::NewStub(Client(pki.Tls("rollout")).Connect(verifier->address()));
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(120));
  v1::VerifyResponse response;
  ASSERT_TRUE(stub->Verify(&context, request, &response).ok()) << verifier->Log();
  EXPECT_TRUE(response.verdict().correct()) << response.verdict().DebugString();
}

// The whole mesh over mutual TLS: `kforge local --tls_dir --token_file`
// serves, the CLI submits a job with --ca_file and --token_file, and the
// job's steps complete (rollout worker to learner and verifiers, verifiers
// to learner, all over TLS).
TEST(SecureMeshTest, KforgeLocalOverTlsTrainsAJobSubmittedWithTheCli) {
  testing::TempDir dir;
  testing::TestPki pki(dir.Sub("tls"));
  ASSERT_TRUE(pki.Issue("local", {"localhost", "127.0.0.1"}).ok());
  testing::WriteFile(dir.Sub("tokens"), testing::RandomToken() + "\n");
  auto local = ChildProcess::Spawn(
      {.argv = {testing::BinaryPath("kforge"), "local", "--serve", "--learner_port=0",
                "--run_dir=" + dir.Sub("run"), "--tls_dir=" + dir.Sub("tls"),
                "--token_file=" + dir.Sub("tokens")},
       .capture_output = true});
  ASSERT_TRUE(local.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(180);
  while (!absl::StrContains((*local)->output(), "all services SERVING")) {
    ASSERT_LT(absl::Now(), deadline) << (*local)->output();
    ASSERT_FALSE((*local)->WaitFor(absl::Milliseconds(100)).ok()) << (*local)->output();
  }
  EXPECT_THAT((*local)->output(), HasSubstr("mutual TLS between the services"));
  v1::ServingPorts ports;
  ASSERT_TRUE(ParseJsonMessage(*ReadFileToString(dir.Sub("run/learner.ports")), &ports).ok());
  const std::string server = absl::StrCat("--server=127.0.0.1:", ports.grpc_port());
  v1::JobSpec spec = testing::FastJobSpec(dir.Sub("run/tiny-model"));
  spec.set_total_steps(2);
  testing::WriteFile(dir.Sub("job.json"), ToJson(spec));
  const std::vector<std::string> tls = {"--ca_file=" + pki.ca(), "--token_file=" + dir.Sub("tokens")};

  const auto [refused, refused_output] =
      RunToExit({testing::BinaryPath("kforge"), "jobs", server, "--ca_file=" + pki.ca()});
  EXPECT_EQ(refused, 1);
  EXPECT_THAT(refused_output, HasSubstr("needs a bearer token"));
  auto [submitted, submit_output] =
      RunToExit({testing::BinaryPath("kforge"), "submit", server, tls[0], tls[1], dir.Sub("job.json")});
  ASSERT_EQ(submitted, 0) << submit_output;
  auto watch = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "watch", server, tls[0],
                                             tls[1], "job-000001"},
                                    .capture_output = true});
  ASSERT_TRUE(watch.ok());
  auto watched = (*watch)->WaitFor(absl::Seconds(240));
  ASSERT_TRUE(watched.ok()) << (*watch)->output() << (*local)->output();
  EXPECT_EQ(watched->code, 0) << (*watch)->output();
  EXPECT_THAT((*watch)->output(), HasSubstr("step 2/2"));
  EXPECT_THAT((*watch)->output(), HasSubstr("SUCCEEDED"));
  for (const char* name : {"learner", "verifier-0", "rollout-0"}) {
    EXPECT_THAT(*ReadFileToString(dir.Sub(std::string("run/") + name + ".log")),
                HasSubstr("serving TLS"))
        << name;
  }
  (*local)->Signal(SIGINT);
  auto exit = (*local)->WaitFor(absl::Seconds(60));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 0) << (*local)->output();
}

}  // namespace
}  // namespace kforge
