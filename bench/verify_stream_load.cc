// VerifyStream under load: C concurrent clients, each on its own connection,
// send N cheap candidates in all to one verifier, honouring the stream's
// credits, and check that every request_id is answered exactly once. Prints
// samples, seconds, samples/s and the p50 / p99 / max latency from write to
// verdict, per kind of candidate and in all.
//
//   build/bin/kforge_verify_stream_load                      # spawns build/bin/kforge-verifier
//   build/bin/kforge_verify_stream_load --server host:50052 --samples 10000 --clients 32
//
// The candidates fail stage 1, so the figures measure the service (streams,
// credits, admission, the static check) rather than candidate code: "prose"
// has no code block and fails in C++ (extraction); "syntax" is a fenced block
// with a syntax error that goes through the Python zygote's static check.
// Each text is distinct and the cache is off (options.use_cache=false); a
// stage-1 failure is never cached anyway. The verifier shares its places out
// as credits across the streams (verifier_worker/stream_credits.h), so a
// client that honours them should not be refused as full; a request refused
// as full, or as sent without a credit (one taken back for a stream that
// opened while it was on its way), is sent again after 10 ms, as the
// rollout worker's dispatcher does, and counted.
// --check exits 1 unless every request was answered exactly once without
// errors.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/client/rpc_client.h"
#include "common/config/json_config.h"
#include "common/process/child_process.h"
#include "common/server/executable_path.h"
#include "kforge/v1/service_config.pb.h"
#include "kforge/v1/verifier_service.grpc.pb.h"

ABSL_FLAG(std::string, server, "", "verifier HOST:PORT (default: spawn kforge-verifier)");
ABSL_FLAG(std::string, verifier_bin, "", "kforge-verifier to spawn (default: beside this program)");
ABSL_FLAG(std::string, work_dir, "/tmp/kforge-verify-load", "scratch folder of a spawned verifier");
ABSL_FLAG(int, max_concurrent, 2, "a spawned verifier's max_concurrent");
ABSL_FLAG(int, max_queued, 64,
          "a spawned verifier's max_queued (max_concurrent + max_queued places are shared out "
          "as credits among the streams)");
ABSL_FLAG(int, clients, 32, "concurrent VerifyStream clients");
ABSL_FLAG(int, samples, 10000, "requests in all");
ABSL_FLAG(double, syntax_share, 0.5, "share of candidates that reach the Python static check");
ABSL_FLAG(bool, check, false, "exit 1 unless every request is answered exactly once, no errors");

namespace kforge {
namespace {

constexpr char kTask[] = R"(import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(64)]
def get_init_inputs():
    return []
)";

bool IsSyntaxKind(int index) {
  const double share = absl::GetFlag(FLAGS_syntax_share);
  return static_cast<int>((index + 1) * share) > static_cast<int>(index * share);
}

v1::VerifyRequest Candidate(int index) {
  v1::VerifyRequest request;
  request.set_request_id(absl::StrCat("load-", index));
  request.mutable_task()->set_id("load/relu");
  request.mutable_task()->set_reference_source(kTask);
  request.set_completion(
      IsSyntaxKind(index)
          ? absl::StrCat("```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
                         "    def forward(self, x)\n        return x + ",
                         index, "\n```\n")
          : absl::StrCat("Candidate ", index, ": I would write a kernel, but not today."));
  request.mutable_options()->set_require_triton(false);
  request.mutable_options()->set_use_cache(false);
  return request;
}

struct Figures {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, int> answers ABSL_GUARDED_BY(mu);
  std::vector<double> latency_ms[2] ABSL_GUARDED_BY(mu);  // prose, syntax
  int64_t full_rejections ABSL_GUARDED_BY(mu) = 0;
  // Refused as sent without a credit: the verifier took the credit back
  // (shared out to another stream) while the request was on its way.
  int64_t credit_rejections ABSL_GUARDED_BY(mu) = 0;
  int64_t other_rejections ABSL_GUARDED_BY(mu) = 0;
  int64_t not_stage1 ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::string> errors ABSL_GUARDED_BY(mu);
};

// One client: its own connection and stream; sends its share of the indices
// [first, first + count) as credits allow, until each is answered.
void RunClient(const std::string& address, int client, int first, int count, Figures* figures) {
  grpc::ChannelArguments args;
  args.SetInt("kforge.load_client", client);  // a connection of its own
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  auto stub = v1::VerifierService::NewStub(channel);
  grpc::ClientContext context;
  SetDeadline(context, absl::Minutes(30));
  auto stream = stub->VerifyStream(&context);

  absl::Mutex mu;
  int credits = 0;
  std::vector<int> to_send;  // indices, back first
  for (int i = first + count - 1; i >= first; --i) to_send.push_back(i);
  absl::flat_hash_map<std::string, std::pair<int, absl::Time>> in_flight;
  int unanswered = count;
  bool broken = false;
  absl::Time rest_until = absl::InfinitePast();  // after a "full" refusal

  std::thread reader([&] {
    v1::VerifyStreamResponse message;
    while (stream->Read(&message)) {
      const absl::Time now = absl::Now();
      absl::MutexLock lock(&mu);
      if (message.has_credit()) {
        credits += message.credit().credits();
      } else if (message.has_ack() && !message.ack().accepted()) {
        auto it = in_flight.find(message.ack().request_id());
        absl::MutexLock f(&figures->mu);
        const bool full = absl::StrContains(message.ack().reason(), "full");
        const bool taken_back = absl::StrContains(message.ack().reason(), "without a credit");
        if (it != in_flight.end() && (full || taken_back)) {
          ++(full ? figures->full_rejections : figures->credit_rejections);
          to_send.insert(to_send.begin(), it->second.first);  // again, last
          in_flight.erase(it);
          rest_until = now + absl::Milliseconds(10);
        } else {
          ++figures->other_rejections;
          figures->errors.push_back(absl::StrCat(message.ack().request_id(), " rejected: ",
                                                 message.ack().reason()));
          if (it != in_flight.end()) in_flight.erase(it), --unanswered;
        }
      } else if (message.has_result()) {
        const std::string& id = message.result().request_id();
        absl::MutexLock f(&figures->mu);
        ++figures->answers[id];
        auto it = in_flight.find(id);
        if (it == in_flight.end()) continue;  // a second answer: counted above
        const int kind = IsSyntaxKind(it->second.first) ? 1 : 0;
        figures->latency_ms[kind].push_back(absl::ToDoubleMilliseconds(now - it->second.second));
        if (message.result().verdict().stage_reached() != v1::STAGE_STATIC) ++figures->not_stage1;
        in_flight.erase(it);
        --unanswered;
      }
    }
    absl::MutexLock lock(&mu);
    broken = true;
  });

  for (;;) {
    int index = -1;
    {
      absl::MutexLock lock(&mu);
      auto ready = [&] { return broken || unanswered == 0 || (credits > 0 && !to_send.empty()); };
      mu.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(10));
      if (broken || unanswered == 0) break;
      if (credits <= 0 || to_send.empty()) continue;
      if (absl::Now() < rest_until) {
        mu.Unlock();
        absl::SleepFor(rest_until - absl::Now());
        mu.Lock();
        continue;
      }
      index = to_send.back();
      to_send.pop_back();
      --credits;
      in_flight[absl::StrCat("load-", index)] = {index, absl::Now()};
    }
    if (!stream->Write(Candidate(index))) break;
  }
  stream->WritesDone();
  reader.join();
  const grpc::Status status = stream->Finish();
  absl::MutexLock lock(&mu);
  absl::MutexLock f(&figures->mu);
  if (!status.ok()) {
    figures->errors.push_back(absl::StrCat("client ", client, ": ", status.error_message()));
  }
  if (unanswered > 0) {
    figures->errors.push_back(absl::StrCat("client ", client, ": ", unanswered, " unanswered"));
  }
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(rank, values.size() - 1)];
}

// Starts kforge-verifier on a free loopback port; its address.
absl::StatusOr<std::string> SpawnVerifier(std::unique_ptr<ChildProcess>* verifier) {
  const std::string dir = absl::GetFlag(FLAGS_work_dir);
  std::filesystem::create_directories(dir);
  const std::string config = dir + "/verifier.json", ports = dir + "/verifier.ports";
  std::filesystem::remove(ports);
  FILE* f = std::fopen(config.c_str(), "w");
  if (f == nullptr) return absl::InternalError("cannot write " + config);
  std::fprintf(f, R"({"work_dir": "%s/work", "max_concurrent": %d, "max_queued": %d})",
               dir.c_str(), absl::GetFlag(FLAGS_max_concurrent), absl::GetFlag(FLAGS_max_queued));
  std::fclose(f);
  std::string bin = absl::GetFlag(FLAGS_verifier_bin);
  if (bin.empty()) bin = (ExecutableDir() / "kforge-verifier").string();
  auto spawned = ChildProcess::Spawn({.argv = {bin, "--host=127.0.0.1", "--port=0",
                                               "--metrics_port=0", "--config=" + config,
                                               "--port_file=" + ports},
                                      .log_file = dir + "/verifier.log"});
  if (!spawned.ok()) return spawned.status();
  *verifier = *std::move(spawned);
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!std::filesystem::exists(ports)) {
    if ((*verifier)->Poll().has_value()) return absl::InternalError("kforge-verifier exited; see " + dir + "/verifier.log");
    if (absl::Now() > deadline) return absl::DeadlineExceededError("kforge-verifier did not start");
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::SleepFor(absl::Milliseconds(50));  // the file is complete once it exists; be safe
  v1::ServingPorts serving;
  auto json = ReadFileToString(ports);
  if (!json.ok()) return json.status();
  if (absl::Status s = ParseJsonMessage(*json, &serving); !s.ok()) return s;
  return absl::StrCat("127.0.0.1:", serving.grpc_port());
}

int Run() {
  std::unique_ptr<ChildProcess> verifier;
  std::string address = absl::GetFlag(FLAGS_server);
  if (address.empty()) {
    absl::StatusOr<std::string> spawned = SpawnVerifier(&verifier);
    if (!spawned.ok()) {
      std::fprintf(stderr, "%s\n", std::string(spawned.status().message()).c_str());
      return 2;
    }
    address = *spawned;
  }
  if (absl::Status s = WaitForServing(MakeChannel(address), absl::Seconds(120)); !s.ok()) {
    std::fprintf(stderr, "verifier %s not serving: %s\n", address.c_str(),
                 std::string(s.message()).c_str());
    return 2;
  }
  const int samples = absl::GetFlag(FLAGS_samples);
  const int clients = std::max(1, std::min(absl::GetFlag(FLAGS_clients), samples));
  Figures figures;
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int c = 0, first = 0; c < clients; ++c) {
    const int count = samples / clients + (c < samples % clients ? 1 : 0);
    threads.emplace_back(RunClient, address, c, first, count, &figures);
    first += count;
  }
  for (std::thread& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  absl::MutexLock lock(&figures.mu);
  int once = 0, more = 0;
  for (const auto& [id, n] : figures.answers) (n == 1 ? once : more) += 1;
  std::printf("VerifyStream load: %s, %d clients, %d samples (%.0f%% syntax errors), "
              "cache off\n\n",
              verifier ? "spawned kforge-verifier" : address.c_str(), clients, samples,
              100 * absl::GetFlag(FLAGS_syntax_share));
  std::printf("| candidates | samples | seconds | samples/s | p50 ms | p99 ms | max ms |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  std::vector<double> all;
  const char* names[] = {"prose (no code)", "syntax error"};
  for (int kind = 0; kind < 2; ++kind) {
    const std::vector<double>& l = figures.latency_ms[kind];
    all.insert(all.end(), l.begin(), l.end());
    if (l.empty()) continue;
    std::printf("| %s | %zu | | | %.1f | %.1f | %.1f |\n", names[kind], l.size(),
                Percentile(l, 0.5), Percentile(l, 0.99), Percentile(l, 1.0));
  }
  std::printf("| all | %zu | %.2f | %.0f | %.1f | %.1f | %.1f |\n\n", all.size(), seconds,
              static_cast<double>(all.size()) / seconds, Percentile(all, 0.5),
              Percentile(all, 0.99), Percentile(all, 1.0));
  std::printf("answered exactly once: %d of %d; answered more than once: %d; not stage 1: %lld\n",
              once, samples, more, static_cast<long long>(figures.not_stage1));
  std::printf("refused as full and re-sent: %lld; refused as sent without a credit (taken back "
              "on its way) and re-sent: %lld; other refusals: %lld; errors: %zu\n",
              static_cast<long long>(figures.full_rejections),
              static_cast<long long>(figures.credit_rejections),
              static_cast<long long>(figures.other_rejections), figures.errors.size());
  for (size_t i = 0; i < std::min<size_t>(figures.errors.size(), 10); ++i) {
    std::printf("  error: %s\n", figures.errors[i].c_str());
  }
  if (verifier != nullptr) verifier->Terminate(absl::Seconds(10));
  const bool ok = once == samples && more == 0 && figures.errors.empty();
  return absl::GetFlag(FLAGS_check) && !ok ? 1 : 0;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return kforge::Run();
}
