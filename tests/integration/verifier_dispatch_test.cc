// The rollout worker's VerifierDispatcher against real kforge-verifier
// processes on loopback: every request is answered exactly once, requests are
// spread over the verifiers, a verifier killed mid-flight loses nothing (its
// requests are re-sent to the other), a malformed request comes back as a
// verdict naming the reason, and a full dispatcher blocks its producer.
#include "rollout_worker/dispatch/task_affinity.h"
#include "rollout_worker/dispatch/verifier_dispatcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/config/json_config.h"
#include "common/process/unique_fd.h"
#include "tests/support/fixtures.h"
#include "tests/support/mesh.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

std::string Source(const std::string& relative) {
  absl::StatusOr<std::string> text =
      ReadFileToString(std::string(KFORGE_TEST_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

// Collects verdicts by request id, counting how often each arrives.
class Collector {
 public:
  void Add(const v1::VerifyResponse& response) {
    absl::MutexLock lock(&mu_);
    ++counts_[response.request_id()];
    verdicts_[response.request_id()] = response.verdict();
  }
  absl::flat_hash_map<std::string, int> counts() const {
    absl::MutexLock lock(&mu_);
    return counts_;
  }
  v1::Verdict verdict(const std::string& id) const {
    absl::MutexLock lock(&mu_);
    auto it = verdicts_.find(id);
    return it == verdicts_.end() ? v1::Verdict() : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> counts_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, v1::Verdict> verdicts_ ABSL_GUARDED_BY(mu_);
};

class VerifierDispatchTest : public ::testing::Test {
 protected:
  void StartVerifiers(int count, const std::string& extra_config = "") {
    for (int i = 0; i < count; ++i) {
      // Each verifier its own scratch space, as separate pods would have.
      const std::string config = dir_.Sub("verifier" + std::to_string(i) + ".json");
      testing::WriteFile(config, absl::StrCat(R"({"work_dir": ")",
                                              dir_.Sub("work" + std::to_string(i)), R"(")",
                                              extra_config, "}"));
      const std::string home = dir_.Sub("v" + std::to_string(i));
      std::filesystem::create_directories(home);
      auto verifier = testing::StartServiceProcess("kforge-verifier", {"--config=" + config}, home);
      ASSERT_TRUE(verifier.ok()) << verifier.status();
      verifiers_.push_back(*std::move(verifier));
    }
  }

  std::string Target() const {
    std::string target;
    for (const auto& v : verifiers_) absl::StrAppend(&target, target.empty() ? "" : ",", v.address());
    return target;
  }

  std::unique_ptr<VerifierDispatcher> NewDispatcher(VerifierDispatcher::Options options) {
    auto dispatcher = VerifierDispatcher::Create(
        options, [this](const v1::VerifyResponse& r) { collector_.Add(r); });
    EXPECT_TRUE(dispatcher.ok()) << dispatcher.status();
    return dispatcher.ok() ? *std::move(dispatcher) : nullptr;
  }

  // A ReLU task with a candidate: "no code" fails stage 1 at once; the clamp
  // candidate is correct and goes through every stage (about a second).
  static v1::VerifyRequest Request(const std::string& id, bool slow) {
    v1::VerifyRequest request;
    request.set_request_id(id);
    request.mutable_task()->set_id("level1/1_ReLU");
    request.mutable_task()->set_reference_source(Source("tasks/kforge-mini/level1/1_ReLU.py"));
    request.set_completion(slow ? Source("tests/data/verifier/cpu/relu_clamp.py")
                                : "I would rather not write code today.");
    request.mutable_options()->set_require_triton(false);
    request.mutable_options()->set_use_cache(false);
    return request;
  }

  // Submits `count` requests ("s0", "s1", ...), slow or fast (see Request),
  // waits up to `limit` for their verdicts, and checks each came once.
  void SubmitAndAnswerEachOnce(VerifierDispatcher& dispatcher, int count, bool slow,
                               absl::Duration limit) {
    for (int i = 0; i < count; ++i) {
      ASSERT_TRUE(dispatcher.Submit(Request(absl::StrCat("s", i), slow)).ok());
    }
    ASSERT_TRUE(dispatcher.WaitIdle(limit));
    const auto counts = collector_.counts();
    ASSERT_EQ(counts.size(), static_cast<size_t>(count));
    for (const auto& [id, n] : counts) EXPECT_EQ(n, 1) << id;
  }

  // The verifiers' addresses in the order Request's task prefers them.
  std::vector<std::string> RankedAddresses() const {
    std::vector<std::string> addresses;
    for (const auto& v : verifiers_) addresses.push_back(v.address());
    std::vector<std::string> ranked;
    for (size_t i : AffinityRanking("level1/1_ReLU", addresses)) ranked.push_back(addresses[i]);
    return ranked;
  }

  testing::TempDir dir_;
  std::vector<testing::ServiceProcess> verifiers_;
  Collector collector_;
};

TEST_F(VerifierDispatchTest, EveryRequestIsAnsweredOnceAcrossTheVerifiers) {
  StartVerifiers(2);
  std::unique_ptr<VerifierDispatcher> dispatcher =
      NewDispatcher({.target = Target(), .max_outstanding = 32});
  // Lanes open on their own threads, and requests go to whichever is ready
  // (a slow verifier holds up no one): the spread is checked from the
  // moment both are open.
  const absl::Time open_by = absl::Now() + absl::Seconds(30);
  while (dispatcher->stats().lanes_connected < 2) {
    ASSERT_LT(absl::Now(), open_by) << "a verifier's lane never opened";
    absl::SleepFor(absl::Milliseconds(20));
  }
  constexpr int kRequests = 200;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(dispatcher->Submit(Request(absl::StrCat("s", i), false)).ok());
  }
  ASSERT_TRUE(dispatcher->WaitIdle(absl::Seconds(120)));
  const auto counts = collector_.counts();
  ASSERT_EQ(counts.size(), static_cast<size_t>(kRequests));
  for (const auto& [id, n] : counts) EXPECT_EQ(n, 1) << id;
  const v1::Verdict verdict = collector_.verdict("s7");
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_STATIC);
  ASSERT_GT(verdict.stages_size(), 0);
  EXPECT_EQ(verdict.stages(0).outcome(), v1::OUTCOME_FAILED);
  const VerifierDispatcher::Stats stats = dispatcher->stats();
  EXPECT_EQ(stats.answered, static_cast<uint64_t>(kRequests));
  EXPECT_EQ(stats.resent, 0u);
  ASSERT_EQ(stats.sent_by_address.size(), 2u) << "only one verifier was used";
  for (const auto& [address, sent] : stats.sent_by_address) EXPECT_GT(sent, 40u) << address;
}

// Waits until the dispatcher has a stream open to every verifier and its
// first credits, so a test's spread is a choice between all of them (a lane
// is connected a moment before its credits arrive, and a request sent in
// that moment goes elsewhere).
void AwaitLanes(const VerifierDispatcher& dispatcher, int lanes) {
  const absl::Time open_by = absl::Now() + absl::Seconds(30);
  while (dispatcher.stats().lanes_with_credit < lanes) {
    ASSERT_LT(absl::Now(), open_by) << "a verifier's lane never opened";
    absl::SleepFor(absl::Milliseconds(20));
  }
}

TEST_F(VerifierDispatchTest, WithTaskAffinityATasksCandidatesGoToOneVerifier) {
  StartVerifiers(2);
  std::unique_ptr<VerifierDispatcher> dispatcher = NewDispatcher(
      {.target = Target(), .max_outstanding = 32, .task_affinity = true,
       .task_affinity_slack = 1000});
  AwaitLanes(*dispatcher, 2);
  constexpr int kRequests = 60;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(dispatcher->Submit(Request(absl::StrCat("s", i), false)).ok());
  }
  ASSERT_TRUE(dispatcher->WaitIdle(absl::Seconds(120)));
  EXPECT_EQ(collector_.counts().size(), static_cast<size_t>(kRequests));
  const VerifierDispatcher::Stats stats = dispatcher->stats();
  ASSERT_EQ(stats.sent_by_address.size(), 1u) << "one task's candidates were spread";
  EXPECT_EQ(stats.sent_by_address.begin()->second, static_cast<uint64_t>(kRequests));
}

TEST_F(VerifierDispatchTest, WithTaskAffinityABusyTasksVerifierSharesTheOverflow) {
  StartVerifiers(2);
  // Slow candidates (every stage, about a second each) pile up in flight on
  // the task's verifier: past the slack the others take them.
  std::unique_ptr<VerifierDispatcher> dispatcher = NewDispatcher(
      {.target = Target(), .max_outstanding = 32, .task_affinity = true,
       .task_affinity_slack = 1});
  AwaitLanes(*dispatcher, 2);
  ASSERT_NO_FATAL_FAILURE(SubmitAndAnswerEachOnce(*dispatcher, 8, true, absl::Seconds(300)));
  const VerifierDispatcher::Stats stats = dispatcher->stats();
  ASSERT_EQ(stats.sent_by_address.size(), 2u) << "the busy verifier kept every candidate";
  for (const auto& [address, sent] : stats.sent_by_address) EXPECT_GE(sent, 2u) << address;
}

TEST_F(VerifierDispatchTest, WithTaskAffinityTheOverflowGoesToTheTasksNextChoiceOnly) {
  StartVerifiers(3);
  // Slack 2 with a third verifier idle: the task's first choice takes three
  // in flight, its second choice the next three; the third choice is
  // reached only when both hold three, which six requests never make while
  // one is left to send. Before, the overflow went to whichever verifier
  // was least busy: here, the idle third one, cold for the task.
  std::unique_ptr<VerifierDispatcher> dispatcher = NewDispatcher(
      {.target = Target(), .max_outstanding = 32, .task_affinity = true,
       .task_affinity_slack = 2});
  AwaitLanes(*dispatcher, 3);
  ASSERT_NO_FATAL_FAILURE(SubmitAndAnswerEachOnce(*dispatcher, 6, true, absl::Seconds(300)));
  const std::vector<std::string> ranked = RankedAddresses();
  const VerifierDispatcher::Stats stats = dispatcher->stats();
  EXPECT_EQ(stats.sent_by_address.size(), 2u);
  EXPECT_TRUE(stats.sent_by_address.contains(ranked[0])) << "not the first choice";
  EXPECT_TRUE(stats.sent_by_address.contains(ranked[1])) << "not the second choice";
  EXPECT_FALSE(stats.sent_by_address.contains(ranked[2])) << "the third choice, cold";
}

TEST_F(VerifierDispatchTest, AnAffinityRankSendsARequestToThatChoiceWhateverItsLoad) {
  StartVerifiers(3);
  // A slack no load reaches: every request would go to the task's first
  // choice, but for those given a rank (a warm-up's copies).
  std::unique_ptr<VerifierDispatcher> dispatcher = NewDispatcher(
      {.target = Target(), .max_outstanding = 32, .task_affinity = true,
       .task_affinity_slack = 1000});
  AwaitLanes(*dispatcher, 3);
  ASSERT_TRUE(dispatcher->Submit(Request("first", false)).ok());
  ASSERT_TRUE(dispatcher->Submit(Request("second", false), 1).ok());
  ASSERT_TRUE(dispatcher->Submit(Request("third", false), 2).ok());
  ASSERT_TRUE(dispatcher->Submit(Request("again", false), 3).ok());  // past the last: wraps
  ASSERT_TRUE(dispatcher->WaitIdle(absl::Seconds(120)));
  EXPECT_EQ(collector_.counts().size(), 4u);
  const std::vector<std::string> ranked = RankedAddresses();
  const VerifierDispatcher::Stats stats = dispatcher->stats();
  ASSERT_EQ(stats.sent_by_address.size(), 3u) << "a rank did not reach its verifier";
  EXPECT_EQ(stats.sent_by_address.at(ranked[0]), 2u) << "the first, and rank 3 wrapped";
  EXPECT_EQ(stats.sent_by_address.at(ranked[1]), 1u);
  EXPECT_EQ(stats.sent_by_address.at(ranked[2]), 1u);
}

// A TCP port that takes connections (the kernel completes the handshake
// into the backlog) and never answers: a gRPC channel to it stays
// connecting, as to a verifier pod that hangs.
class SilentPort {
 public:
  SilentPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_.get(), 16), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  UniqueFd fd_;
  int port_ = 0;
};

TEST_F(VerifierDispatchTest, AVerifierThatNeverAnswersHoldsUpOnlyItsOwnLane) {
  StartVerifiers(1);
  SilentPort silent;
  std::unique_ptr<VerifierDispatcher> dispatcher = NewDispatcher(
      {.target = absl::StrCat(silent.address(), ",", Target()), .max_outstanding = 16});
  // While the silent verifier's stream is still being opened (gRPC gives a
  // connection attempt 20 s), every request is taken and answered by the
  // other: neither Submit nor the answers wait for the silent one.
  const absl::Time before_it_gives_up = absl::Now() + absl::Seconds(15);
  constexpr int kRequests = 40;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(dispatcher->Submit(Request(absl::StrCat("h", i), false)).ok());
  }
  ASSERT_TRUE(dispatcher->WaitIdle(before_it_gives_up - absl::Now()));
  const auto counts = collector_.counts();
  ASSERT_EQ(counts.size(), static_cast<size_t>(kRequests));
  for (const auto& [id, n] : counts) EXPECT_EQ(n, 1) << id;
  const VerifierDispatcher::Stats stats = dispatcher->stats();
  EXPECT_EQ(stats.sent_by_address.count(silent.address()), 0u);
  EXPECT_EQ(stats.sent_by_address.at(Target()), static_cast<uint64_t>(kRequests));
  EXPECT_EQ(stats.lanes_connected, 1);
}

TEST_F(VerifierDispatchTest, AVerifierKilledMidFlightLosesNothing) {
  StartVerifiers(2);
  std::unique_ptr<VerifierDispatcher> dispatcher =
      NewDispatcher({.target = Target(), .max_outstanding = 64});
  constexpr int kRequests = 12;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(dispatcher->Submit(Request(absl::StrCat("slow", i), true)).ok());
  }
  // Once requests are out, the verifier holding the most of them dies
  // without a word (each takes about a second, so it holds some still).
  for (int i = 0; i < 200 && dispatcher->stats().sent < kRequests; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const auto sent = dispatcher->stats().sent_by_address;
  size_t victim = 0;
  for (size_t i = 0; i < verifiers_.size(); ++i) {
    auto it = sent.find(verifiers_[i].address());
    auto best = sent.find(verifiers_[victim].address());
    if (it != sent.end() && (best == sent.end() || it->second > best->second)) victim = i;
  }
  verifiers_[victim].process->Signal(SIGKILL);
  ASSERT_TRUE(dispatcher->WaitIdle(absl::Seconds(240)));
  const auto counts = collector_.counts();
  ASSERT_EQ(counts.size(), static_cast<size_t>(kRequests));
  for (const auto& [id, n] : counts) EXPECT_EQ(n, 1) << id;
  int correct = 0;
  for (int i = 0; i < kRequests; ++i) correct += collector_.verdict(absl::StrCat("slow", i)).correct();
  EXPECT_EQ(correct, kRequests);
  EXPECT_GT(dispatcher->stats().resent, 0u) << "the killed verifier held nothing";
}

TEST_F(VerifierDispatchTest, AFullVerifierPushesBackWithoutLosingOrFailingAnything) {
  // One slot and one queued request at most, shared by three workers'
  // streams: the verifier's two places are shared out as credits, so the
  // workers wait for a credit instead of being refused as full, and every
  // request is answered once.
  StartVerifiers(1, R"(, "max_concurrent": 1, "max_queued": 1)");
  std::vector<std::unique_ptr<VerifierDispatcher>> workers;
  for (int w = 0; w < 3; ++w) workers.push_back(NewDispatcher({.target = Target()}));
  for (int i = 0; i < 3; ++i) {
    for (int w = 0; w < 3; ++w) {
      ASSERT_TRUE(workers[w]->Submit(Request(absl::StrCat("w", w, "-", i), true)).ok());
    }
  }
  uint64_t resent = 0;
  for (auto& worker : workers) {
    ASSERT_TRUE(worker->WaitIdle(absl::Seconds(240)));
    EXPECT_EQ(worker->stats().undeliverable, 0u);
    resent += worker->stats().resent;
  }
  // A re-send can only follow a credit taken back on its way (a stream
  // opening): never more than the places.
  EXPECT_LE(resent, 2u);
  EXPECT_LE(testing::ScrapeMetric(verifiers_[0].ports.metrics_port(),
                                  R"(kforge_verifier_stream_rejections_total{reason="full"})"),
            0)
      << "a worker honouring its credits was refused as full";
  const auto counts = collector_.counts();
  ASSERT_EQ(counts.size(), 9u);
  for (const auto& [id, n] : counts) {
    EXPECT_EQ(n, 1) << id;
    EXPECT_TRUE(collector_.verdict(id).correct()) << id << ": " << collector_.verdict(id).ShortDebugString();
  }
}

TEST_F(VerifierDispatchTest, AMalformedRequestComesBackAsAVerdictNamingTheReason) {
  StartVerifiers(1);
  std::unique_ptr<VerifierDispatcher> dispatcher = NewDispatcher({.target = Target()});
  v1::VerifyRequest bad = Request("bad", false);
  bad.clear_task();
  ASSERT_TRUE(dispatcher->Submit(bad).ok());
  ASSERT_TRUE(dispatcher->Submit(Request("good", false)).ok());
  ASSERT_TRUE(dispatcher->WaitIdle(absl::Seconds(60)));
  const v1::Verdict verdict = collector_.verdict("bad");
  ASSERT_GT(verdict.stages_size(), 0);
  EXPECT_EQ(verdict.stages(0).outcome(), v1::OUTCOME_INTERNAL_ERROR);
  EXPECT_THAT(verdict.stages(0).message(), HasSubstr("task"));
  EXPECT_EQ(collector_.counts().size(), 2u);
  EXPECT_EQ(dispatcher->stats().rejected, 1u);
}

TEST_F(VerifierDispatchTest, ALocallyAnsweredRequestIsHandedBackWithItsSampleForDelivery) {
  // No verifier will deliver a refused sample to the learner: the caller
  // gets the request, sample included, and the verdict to deliver with.
  StartVerifiers(1);
  absl::Mutex mu;
  std::vector<std::pair<v1::VerifyRequest, v1::VerifyResponse>> local;
  VerifierDispatcher::Options options{.target = Target()};
  options.on_local_answer = [&](const v1::VerifyRequest& request,
                                const v1::VerifyResponse& response) {
    absl::MutexLock lock(&mu);
    local.emplace_back(request, response);
  };
  std::unique_ptr<VerifierDispatcher> dispatcher = NewDispatcher(options);
  v1::VerifyRequest bad = Request("bad", false);
  bad.clear_task();
  bad.mutable_sample()->mutable_key()->set_sample_id("job/g/0");
  ASSERT_TRUE(dispatcher->Submit(bad).ok());
  ASSERT_TRUE(dispatcher->Submit(Request("good", false)).ok());
  ASSERT_TRUE(dispatcher->WaitIdle(absl::Seconds(60)));
  absl::MutexLock lock(&mu);
  ASSERT_EQ(local.size(), 1u) << "only the refused request is answered locally";
  EXPECT_EQ(local[0].first.sample().key().sample_id(), "job/g/0");
  EXPECT_EQ(local[0].second.request_id(), "bad");
  EXPECT_EQ(local[0].second.verdict().stages(0).outcome(), v1::OUTCOME_INTERNAL_ERROR);
  EXPECT_EQ(collector_.counts().size(), 2u) << "and on_result still sees both once";
}

TEST_F(VerifierDispatchTest, APoisonRequestIsAnsweredAfterItsLastAttemptAndOthersFlow) {
  StartVerifiers(1);
  std::unique_ptr<VerifierDispatcher> dispatcher =
      NewDispatcher({.target = Target(), .backoff_initial = absl::Milliseconds(20),
                     .max_attempts = 3});
  v1::VerifyRequest poison = Request("poison", false);
  // Invalid UTF-8 in a proto3 string: the verifier cannot parse it and its
  // stream breaks, every time it is sent.
  poison.set_completion("\xff\xfe not UTF-8");
  ASSERT_TRUE(dispatcher->Submit(poison).ok());
  ASSERT_TRUE(dispatcher->Submit(Request("fine", false)).ok());
  ASSERT_TRUE(dispatcher->WaitIdle(absl::Seconds(60)));
  const v1::Verdict verdict = collector_.verdict("poison");
  ASSERT_GT(verdict.stages_size(), 0);
  EXPECT_EQ(verdict.stages(0).outcome(), v1::OUTCOME_INTERNAL_ERROR);
  EXPECT_THAT(verdict.stages(0).message(), HasSubstr("not answered after 3 sends"));
  EXPECT_EQ(collector_.verdict("fine").stages(0).outcome(), v1::OUTCOME_FAILED);
  EXPECT_EQ(dispatcher->stats().undeliverable, 1u);
}

TEST_F(VerifierDispatchTest, AFullDispatcherBlocksItsProducerUntilStopped) {
  // Nothing listens here: requests queue and stay.
  std::unique_ptr<VerifierDispatcher> dispatcher =
      NewDispatcher({.target = "127.0.0.1:1", .max_outstanding = 3});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(dispatcher->Submit(Request(absl::StrCat("q", i), false)).ok());
  }
  EXPECT_FALSE(dispatcher->Submit(Request("q0", false)).ok()) << "duplicate id accepted";
  absl::Notification returned;
  absl::Status fourth;
  std::thread producer([&] {
    fourth = dispatcher->Submit(Request("q3", false));
    returned.Notify();
  });
  EXPECT_FALSE(returned.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  EXPECT_EQ(dispatcher->stats().queued, 3);
  dispatcher.reset();
  producer.join();
  EXPECT_EQ(fourth.code(), absl::StatusCode::kCancelled);
}

TEST(ResolveVerifierTargetTest, ListsAndDnsNamesResolveAndBadTargetsAreNamed) {
  auto list = ResolveVerifierTarget("127.0.0.1:5001, 127.0.0.1:5002");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_THAT(*list, ::testing::ElementsAre("127.0.0.1:5001", "127.0.0.1:5002"));
  auto grpc_list = ResolveVerifierTarget("ipv4:127.0.0.1:5001,127.0.0.1:5002");
  ASSERT_TRUE(grpc_list.ok()) << grpc_list.status();
  EXPECT_EQ(*grpc_list, *list);
  auto dns = ResolveVerifierTarget("dns:///localhost:5003");
  ASSERT_TRUE(dns.ok()) << dns.status();
  EXPECT_THAT(*dns, Contains(::testing::AnyOf("127.0.0.1:5003", "[::1]:5003")));
  EXPECT_THAT(ResolveVerifierTarget("dns:///localhost").status().message(),
              HasSubstr("dns:///NAME:PORT"));
  EXPECT_THAT(ResolveVerifierTarget("just-a-host").status().message(), HasSubstr("HOST:PORT"));
  EXPECT_FALSE(ResolveVerifierTarget("").ok());
  EXPECT_EQ(ResolveVerifierTarget("dns:///no-such-host.invalid:1").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kforge
