#include "rollout_worker/dispatch/verifier_dispatcher.h"

#include <netdb.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/client/rpc_client.h"
#include "common/status_macros.h"
#include "rollout_worker/dispatch/task_affinity.h"

namespace kforge {
namespace {

// Answered ids remembered to drop late duplicate verdicts; a duplicate can
// only follow a re-send, and re-sends are bounded by the outstanding limit.
constexpr size_t kAnsweredMemoryFactor = 16;

absl::StatusOr<std::vector<std::string>> ResolveName(absl::string_view host_port) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(host_port.substr(colon + 1), &port) ||
      port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("verifier target \"dns:///", host_port, "\": expected dns:///NAME:PORT"));
  }
  const std::string host(host_port.substr(0, colon));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    return absl::NotFoundError(
        absl::StrCat("verifier target: cannot resolve \"", host, "\": ", ::gai_strerror(rc)));
  }
  std::vector<std::string> addresses;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char ip[NI_MAXHOST] = {};
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, ip, sizeof(ip), nullptr, 0, NI_NUMERICHOST) != 0) {
      continue;
    }
    addresses.push_back(a->ai_family == AF_INET6 ? absl::StrCat("[", ip, "]:", port)
                                                 : absl::StrCat(ip, ":", port));
  }
  ::freeaddrinfo(found);
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  if (addresses.empty()) {
    return absl::NotFoundError(absl::StrCat("verifier target: \"", host, "\" has no address"));
  }
  return addresses;
}

// A verdict the dispatcher gives itself: not the candidate's fault, so the
// learner neither rewards nor penalises it.
v1::VerifyResponse LocalVerdict(const std::string& id, const std::string& message) {
  v1::VerifyResponse response;
  response.set_request_id(id);
  v1::Verdict* verdict = response.mutable_verdict();
  verdict->set_stage_reached(v1::STAGE_STATIC);
  v1::StageResult* stage = verdict->add_stages();
  stage->set_stage(v1::STAGE_STATIC);
  stage->set_outcome(v1::OUTCOME_INTERNAL_ERROR);
  stage->set_message(message);
  return response;
}

// Rejections that say nothing about the request itself: send it elsewhere.
bool IsCapacityRejection(absl::string_view reason) {
  return absl::StrContains(reason, "full") || absl::StrContains(reason, "credit") ||
         absl::StrContains(reason, "draining");
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ResolveVerifierTarget(const std::string& target) {
  absl::string_view rest = target;
  if (absl::ConsumePrefix(&rest, "dns:///")) return ResolveName(rest);
  // gRPC's own list form, "ipv4:a:p,b:p", names the same addresses.
  if (!absl::ConsumePrefix(&rest, "ipv4:")) absl::ConsumePrefix(&rest, "ipv6:");
  std::vector<std::string> addresses;
  for (absl::string_view piece : absl::StrSplit(rest, ',', absl::SkipWhitespace())) {
    piece = absl::StripAsciiWhitespace(piece);
    if (piece.rfind(':') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("verifier target: \"", piece, "\" is not HOST:PORT"));
    }
    addresses.emplace_back(piece);
  }
  if (addresses.empty()) {
    return absl::InvalidArgumentError("verifier target: empty (HOST:PORT,... or dns:///NAME:PORT)");
  }
  return addresses;
}

// One verifier address: its stream, credits and reader thread. Created,
// connected, torn down and destroyed only by the dispatch thread; the reader
// thread updates credits and `broken` under the dispatcher's mutex.
struct VerifierDispatcher::Lane {
  std::string address;
  std::unique_ptr<v1::VerifierService::Stub> stub;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::VerifyRequest, v1::VerifyStreamResponse>> stream;
  std::thread reader;
  int credits = 0;
  bool connecting = false;  // its thread is opening the stream
  bool connected = false;  // stream open, reader running
  bool broken = false;     // reader ended: tear down, then reconnect
  bool gone = false;       // no longer resolved: close for good
  absl::Time rest_until = absl::InfinitePast();  // after a "verifier full" rejection
  bool write_failed = false;  // until the stream is torn down
  absl::Time retry_at = absl::InfinitePast();
  absl::Duration backoff;
};

absl::StatusOr<std::unique_ptr<VerifierDispatcher>> VerifierDispatcher::Create(
    Options options, ResultCallback on_result) {
  KF_RETURN_IF_ERROR(ResolveVerifierTarget(options.target).status());
  if (options.max_outstanding < 1) {
    return absl::InvalidArgumentError("max_outstanding must be at least 1");
  }
  auto dispatcher = std::unique_ptr<VerifierDispatcher>(
      new VerifierDispatcher(std::move(options), std::move(on_result)));
  dispatcher->dispatch_thread_ = std::thread([d = dispatcher.get()] {
    pthread_setname_np(pthread_self(), "kf-dispatch");
    d->DispatchLoop();
  });
  return dispatcher;
}

VerifierDispatcher::VerifierDispatcher(Options options, ResultCallback on_result)
    : options_(std::move(options)), on_result_(std::move(on_result)) {}

void VerifierDispatcher::Shutdown() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

VerifierDispatcher::~VerifierDispatcher() {
  Shutdown();
  if (dispatch_thread_.joinable()) dispatch_thread_.join();
}

absl::Status VerifierDispatcher::Submit(v1::VerifyRequest request, int affinity_rank) {
  const std::string id = request.request_id();
  if (id.empty()) return absl::InvalidArgumentError("request_id: is required");
  absl::MutexLock lock(&mu_);
  if (known_ids_.contains(id)) {
    return absl::InvalidArgumentError(absl::StrCat("request_id ", id, " is already in flight"));
  }
  auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || known_ids_.size() < static_cast<size_t>(options_.max_outstanding);
  };
  mu_.Await(absl::Condition(&room));
  if (stopping_) return absl::CancelledError("the verifier dispatcher is stopping");
  // Again after the wait: two callers may have waited with the same id.
  if (known_ids_.contains(id)) {
    return absl::InvalidArgumentError(absl::StrCat("request_id ", id, " is already in flight"));
  }
  known_ids_.insert(id);
  answered_.erase(id);
  queue_.push_back({.request = std::move(request), .affinity_rank = std::max(affinity_rank, 0)});
  ++stats_.submitted;
  return absl::OkStatus();
}

bool VerifierDispatcher::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return known_ids_.empty(); };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

VerifierDispatcher::Stats VerifierDispatcher::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.queued = static_cast<int64_t>(queue_.size());
  s.outstanding = static_cast<int64_t>(outstanding_.size());
  for (const auto& [address, lane] : lanes_) {
    s.lanes_connected += lane->connected ? 1 : 0;
    s.lanes_with_credit += lane->connected && lane->credits > 0 ? 1 : 0;
  }
  return s;
}

void VerifierDispatcher::Resolve() {
  next_resolve_ = absl::Now() + options_.resolve_interval;
  // Only this thread adds or removes lanes, so the set known here stays
  // true while the lock is released.
  std::vector<std::string> known;
  for (const auto& [address, lane] : lanes_) known.push_back(address);
  mu_.Unlock();
  absl::StatusOr<std::vector<std::string>> addresses = ResolveVerifierTarget(options_.target);
  std::vector<std::unique_ptr<Lane>> added;
  if (addresses.ok()) {
    for (const std::string& address : *addresses) {
      if (std::find(known.begin(), known.end(), address) != known.end()) continue;
      auto lane = std::make_unique<Lane>();
      lane->address = address;
      // A name's pods are dialled by IP; their certificates name the Service.
      const bool by_name = absl::StartsWith(options_.target, "dns:");
      lane->stub = v1::VerifierService::NewStub(options_.security.Connect(
          address, 64 << 20, by_name ? TargetHost(options_.target) : ""));
      lane->backoff = options_.backoff_initial;
      added.push_back(std::move(lane));
    }
  }
  mu_.Lock();
  if (!addresses.ok()) return;  // keep the lanes we have; try again later
  for (auto& [address, lane] : lanes_) {
    lane->gone = std::find(addresses->begin(), addresses->end(), address) == addresses->end();
    if (lane->gone && lane->context != nullptr) lane->context->TryCancel();
  }
  for (std::unique_ptr<Lane>& lane : added) {
    const std::string address = lane->address;
    lanes_.emplace(address, std::move(lane));
  }
}

void VerifierDispatcher::Connect(Lane* lane) {
  // The context exists before the stream, so stopping or retiring the lane
  // can cancel a stream still being opened.
  lane->context = std::make_unique<grpc::ClientContext>();
  lane->credits = 0;
  lane->rest_until = absl::InfinitePast();
  lane->write_failed = false;
  lane->broken = false;
  lane->connecting = true;
  lane->reader = std::thread([this, lane] {
    pthread_setname_np(pthread_self(), "kf-lane");
    OpenAndRead(lane);
  });
}

void VerifierDispatcher::OpenAndRead(Lane* lane) {
  // Blocks until the verifier takes the stream (or the attempt fails),
  // without the lock: only this lane waits for it.
  auto stream = lane->stub->VerifyStream(lane->context.get());
  {
    absl::MutexLock lock(&mu_);
    lane->stream = std::move(stream);
    lane->connecting = false;
    lane->connected = true;
  }
  ReadLoop(lane);
}

void VerifierDispatcher::ReadLoop(Lane* lane) {
  v1::VerifyStreamResponse message;
  bool answered_any = false;
  while (lane->stream->Read(&message)) {
    if (message.has_result()) {
      answered_any = true;
      Answer(message.result());
      continue;
    }
    bool rejected = false;
    v1::VerifyRequest rejected_request;
    {
      absl::MutexLock lock(&mu_);
      if (message.has_credit()) {
        lane->credits += message.credit().credits();
      } else if (message.has_ack() && message.ack().accepted()) {
        auto out = outstanding_.find(message.ack().request_id());
        if (out != outstanding_.end() && out->second.lane == lane->address) out->second.acked = true;
      } else if (message.has_ack() && !message.ack().accepted()) {
        const std::string& id = message.ack().request_id();
        auto out = outstanding_.find(id);
        const bool here = out != outstanding_.end() && out->second.lane == lane->address;
        if (absl::StrContains(message.ack().reason(), "duplicate")) {
          // A re-send reached the stream that still verifies the first
          // send: that one will answer. Nothing to do.
        } else if (IsCapacityRejection(message.ack().reason())) {
          // Not the request's fault: it goes back without using an attempt,
          // and this lane rests a moment before it is written to again.
          if (here) {
            --out->second.pending.attempts;
            RequeueOne(id, /*resend=*/true);
          }
          lane->rest_until = absl::Now() + options_.backoff_initial;
        } else if (here) {
          ++stats_.rejected;
          rejected = true;
          rejected_request = out->second.pending.request;
        }
      }
    }
    if (rejected) {
      AnswerLocally(rejected_request,
                    LocalVerdict(message.ack().request_id(),
                                 absl::StrCat("the verifier rejected the request: ",
                                              message.ack().reason())));
    }
  }
  absl::MutexLock lock(&mu_);
  if (answered_any || lane->credits > 0) lane->backoff = options_.backoff_initial;
  lane->broken = true;
  lane->connected = false;
  Requeue(lane->address);
}

void VerifierDispatcher::RequeueOne(const std::string& id, bool resend) {
  auto it = outstanding_.find(id);
  if (it == outstanding_.end()) return;
  Pending pending = std::move(it->second.pending);
  pending.last_lane = it->second.lane;
  outstanding_.erase(it);
  if (resend) ++stats_.resent;
  queue_.push_front(std::move(pending));
}

void VerifierDispatcher::Requeue(const std::string& lane) {
  std::vector<std::string> ids;
  const Outstanding* first_unread = nullptr;
  for (const auto& [id, out] : outstanding_) {
    if (out.lane != lane) continue;
    ids.push_back(id);
    if (!out.acked && (first_unread == nullptr || out.seq < first_unread->seq)) first_unread = &out;
  }
  for (auto& [id, out] : outstanding_) {
    if (out.lane == lane && !out.acked && &out != first_unread) --out.pending.attempts;
  }
  for (const std::string& id : ids) RequeueOne(id, /*resend=*/true);
}

void VerifierDispatcher::AnswerLocally(const v1::VerifyRequest& request,
                                       const v1::VerifyResponse& response) {
  {
    absl::MutexLock lock(&mu_);
    // Answered already (a late verdict won): nothing of the caller's to do.
    if (answered_.contains(response.request_id())) return;
  }
  if (options_.on_local_answer) options_.on_local_answer(request, response);
  Answer(response);
}

void VerifierDispatcher::Answer(const v1::VerifyResponse& response) {
  const std::string& id = response.request_id();
  {
    absl::MutexLock lock(&mu_);
    if (answered_.contains(id) || !known_ids_.contains(id)) {
      ++stats_.duplicate_verdicts;
      return;
    }
    // A timed-out request may be queued for a re-send when its first
    // verdict arrives after all: take it off the queue.
    if (outstanding_.erase(id) == 0) {
      auto queued = std::find_if(queue_.begin(), queue_.end(), [&](const Pending& p) {
        return p.request.request_id() == id;
      });
      if (queued != queue_.end()) queue_.erase(queued);
    }
    answered_.insert(id);
    answered_order_.push_back(id);
    while (answered_order_.size() > kAnsweredMemoryFactor * options_.max_outstanding) {
      answered_.erase(answered_order_.front());
      answered_order_.pop_front();
    }
  }
  on_result_(response);
  // Only now does the request stop counting as in flight: WaitIdle and
  // Submit's bound see it after its verdict was handed over.
  absl::MutexLock lock(&mu_);
  known_ids_.erase(id);
  ++stats_.answered;
}

VerifierDispatcher::Lane* VerifierDispatcher::PickLane(const Pending& pending) {
  const absl::Time now = absl::Now();
  const std::string& avoid = pending.last_lane;
  std::vector<Lane*> ready;
  for (auto& [address, lane] : lanes_) {
    if (lane->connected && !lane->gone && !lane->write_failed && lane->credits > 0 &&
        lane->rest_until <= now) {
      ready.push_back(lane.get());
    }
  }
  if (ready.empty()) return nullptr;
  // The first ready lane from the turn on that `take` accepts, which then
  // moves the turn past it.
  auto next_in_turn = [&](auto take) -> Lane* {
    for (size_t i = 0; i < ready.size(); ++i) {
      Lane* lane = ready[(next_lane_ + i) % ready.size()];
      if (take(*lane)) {
        next_lane_ = (next_lane_ + i + 1) % ready.size();
        return lane;
      }
    }
    return nullptr;
  };
  if (options_.task_affinity && ready.size() > 1) {
    const v1::VerifyRequest& request = pending.request;
    const std::string& task =
        request.task().id().empty() ? request.task().reference_source() : request.task().id();
    if (pending.affinity_rank > 0 && avoid.empty()) {
      // Ranked over every connected lane, not only those with a credit now,
      // so that the rank names the same verifier the overflow will reach.
      std::vector<std::string> connected;
      for (const auto& [address, lane] : lanes_) {
        if (lane->connected && !lane->gone) connected.push_back(address);
      }
      const std::vector<size_t> ranking = AffinityRanking(task, connected);
      const std::string& wanted =
          connected[ranking[static_cast<size_t>(pending.affinity_rank) % ranking.size()]];
      for (Lane* lane : ready) {
        if (lane->address == wanted) return lane;
      }
      // That verifier has no credit now: the request goes as any other
      // rather than hold up the queue behind it.
    }
    absl::flat_hash_map<std::string, int> by_address;
    for (const auto& [id, outstanding] : outstanding_) ++by_address[outstanding.lane];
    std::vector<std::string> addresses;
    std::vector<int> in_flight;
    std::optional<size_t> avoid_index;
    for (Lane* lane : ready) {
      if (lane->address == avoid) avoid_index = addresses.size();
      addresses.push_back(lane->address);
      in_flight.push_back(by_address[lane->address]);
    }
    if (std::optional<size_t> chosen = AffinityChoice(task, addresses, in_flight,
                                                      options_.task_affinity_slack, avoid_index)) {
      return ready[*chosen];
    }
  }
  if (Lane* lane = next_in_turn(
          [&](const Lane& l) { return l.address != avoid || ready.size() == 1; })) {
    return lane;
  }
  return ready.front();
}

void VerifierDispatcher::DispatchLoop() {
  mu_.Lock();
  while (!stopping_) {
    const absl::Time now = absl::Now();
    if (now >= next_resolve_) Resolve();
    // Tear down broken lanes (their readers have returned) and reconnect.
    for (auto it = lanes_.begin(); it != lanes_.end();) {
      Lane* lane = it->second.get();
      if (lane->broken) {
        lane->reader.join();
        if (lane->stream != nullptr) (void)lane->stream->Finish();
        lane->stream.reset();
        lane->context.reset();
        lane->broken = false;
        lane->retry_at = now + lane->backoff;
        lane->backoff = std::min(lane->backoff * 2, options_.backoff_max);
      }
      if (lane->gone && !lane->connected && !lane->connecting) {
        it = lanes_.erase(it);
        continue;
      }
      if (!lane->connected && !lane->connecting && now >= lane->retry_at) Connect(lane);
      ++it;
    }
    // Verdicts overdue: send again elsewhere; the first verdict wins.
    std::vector<std::string> overdue;
    for (const auto& [id, out] : outstanding_) {
      if (now - out.sent > options_.verify_timeout) overdue.push_back(id);
    }
    for (const std::string& id : overdue) RequeueOne(id, /*resend=*/true);

    std::vector<std::pair<v1::VerifyRequest, v1::VerifyResponse>> given_up;
    while (!queue_.empty()) {
      if (queue_.front().attempts >= options_.max_attempts) {
        v1::VerifyRequest request = std::move(queue_.front().request);
        queue_.pop_front();
        ++stats_.undeliverable;
        v1::VerifyResponse local = LocalVerdict(
            request.request_id(),
            absl::StrCat("not answered after ", options_.max_attempts,
                         " sends (each verifier stream it was written to broke or timed out)"));
        given_up.emplace_back(std::move(request), std::move(local));
        continue;
      }
      Lane* lane = PickLane(queue_.front());
      if (lane == nullptr) break;
      Pending pending = std::move(queue_.front());
      queue_.pop_front();
      --lane->credits;
      ++pending.attempts;
      const std::string id = pending.request.request_id();
      const v1::VerifyRequest request = pending.request;
      outstanding_.emplace(id, Outstanding{.pending = std::move(pending),
                                           .lane = lane->address,
                                           .sent = absl::Now(),
                                           .seq = next_seq_++});
      ++stats_.sent;
      ++stats_.sent_by_address[lane->address];
      // Only this thread writes or tears lanes down, so the stream stays
      // valid; the lock is released so readers go on while a write blocks.
      mu_.Unlock();
      const bool written = lane->stream->Write(request);
      mu_.Lock();
      if (!written) {
        // The stream is breaking: no more writes to it; cancel it so its
        // reader tears it down and the lane reconnects.
        lane->write_failed = true;
        lane->context->TryCancel();
        RequeueOne(id, /*resend=*/false);
      }
    }
    if (!given_up.empty()) {
      mu_.Unlock();
      for (const auto& [request, response] : given_up) AnswerLocally(request, response);
      mu_.Lock();
    }
    // Wakes at once for work a lane can take or a lane to tear down; the
    // timeout paces reconnects and the overdue check.
    auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (stopping_) return true;
      for (const auto& [address, lane] : lanes_) {
        if (lane->broken || (!queue_.empty() && lane->connected && !lane->write_failed &&
                             lane->credits > 0 && lane->rest_until <= absl::Now())) {
          return true;
        }
      }
      return false;
    };
    mu_.AwaitWithTimeout(absl::Condition(&wake), absl::Milliseconds(50));
  }
  // Stopping: cancel every stream, then join the readers without the lock.
  std::vector<Lane*> lanes;
  for (auto& [address, lane] : lanes_) {
    if (lane->context != nullptr) lane->context->TryCancel();
    lanes.push_back(lane.get());
  }
  mu_.Unlock();
  for (Lane* lane : lanes) {
    if (lane->reader.joinable()) lane->reader.join();
    if (lane->stream != nullptr) (void)lane->stream->Finish();
  }
}

}  // namespace kforge
