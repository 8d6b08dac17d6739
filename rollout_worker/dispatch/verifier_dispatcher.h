// VerifierDispatcher: hands each finished candidate to a verifier at once over
// VerifyStream, balanced round-robin across every verifier the target names,
// and makes sure each gets exactly one verdict back.
//
// AFFINITY. With task_affinity, a task's candidates go to one verifier (the
// same from every rollout worker: rendezvous hashing of the task and the
// verifiers' addresses), so one reference epoch and one verdict cache serve
// them all instead of each verifier building its own; when that verifier
// has more than task_affinity_slack of this dispatcher's requests in flight
// beyond the least-loaded verifier, a candidate goes to the task's second
// choice, then its third (bounded-load rendezvous hashing), so a busy task
// does not queue behind itself and its overflow still finds few verifiers,
// each with the task's epoch made.
//
//   VerifierDispatcher::Options options{.target = "dns:///kforge-verifier:50052"};
//   KF_ASSIGN_OR_RETURN(auto dispatcher, VerifierDispatcher::Create(
//       options, [](const v1::VerifyResponse& r) { Record(r); }));
//   KF_RETURN_IF_ERROR(dispatcher->Submit(std::move(request)));  // blocks when full
//
// DELIVERY. One bidirectional stream per verifier address ("lane"). A request
// is written to a lane holding one of the server's credits (so a slow
// verifier pushes back) and stays outstanding until its verdict arrives.
// When a lane's stream breaks (the verifier died, was drained, or the
// network dropped) its outstanding requests go back to the front of the
// queue and are re-sent to another lane; so are requests the verifier
// rejected as full (without using an attempt; that verifier rests a moment),
// and requests without a verdict after verify_timeout. A
// request may therefore be verified twice, but on_result sees each
// request_id once: later verdicts for an id already answered are dropped and
// counted. A broken stream charges an attempt only to the requests the
// verifier had acknowledged and to the first one it had not (the one its
// reader stopped at: a message that breaks every stream it reaches); the
// requests written after it were never read and are re-sent for free.
// Requests the verifier rejects as malformed are answered at once
// with a Verdict whose stage-1 message carries the reason, and so are
// requests sent max_attempts times without a verdict (nothing is lost);
// on_local_answer, if set, gets each such request with its local verdict
// (no verifier will deliver it to the learner: the caller must).
//
// BACK-PRESSURE. Submit blocks while max_outstanding requests are queued or
// outstanding, so a slow verifier pool slows the producer instead of growing
// memory.
//
// TARGETS. "host:port,host:port" (gRPC's "ipv4:" prefix allowed) or
// "dns:///name:port": the name is resolved
// (every A/AAAA record, as a Kubernetes headless Service returns one per
// pod) at start and every resolve_interval; new addresses get lanes, lanes of
// vanished addresses close once idle. A broken lane reconnects with
// exponential back-off. Resolving and dialling never hold the dispatcher's
// lock, and each lane opens its stream on its own thread: a verifier that is
// slow to resolve, accept or answer delays only its own lane, while requests
// flow to the others.
//
// Threads: "kf-dispatch" writes and watches timeouts; one "kf-lane" thread
// per lane opens its stream and reads it. on_result runs on a lane's thread
// and must not block long.
#ifndef KFORGE_ROLLOUT_WORKER_DISPATCH_VERIFIER_DISPATCHER_H_
#define KFORGE_ROLLOUT_WORKER_DISPATCH_VERIFIER_DISPATCHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security/channel_security.h"
#include "kforge/v1/verifier_service.grpc.pb.h"

namespace kforge {

// The addresses a target names now: the list as given, or a DNS name's
// records as "ip:port". INVALID_ARGUMENT for a malformed target, NOT_FOUND
// when a name resolves to nothing.
absl::StatusOr<std::vector<std::string>> ResolveVerifierTarget(const std::string& target);

class VerifierDispatcher {
 public:
  struct Options {
    std::string target;
    int32_t max_outstanding = 256;
    absl::Duration verify_timeout = absl::Seconds(300);
    absl::Duration resolve_interval = absl::Seconds(30);
    absl::Duration backoff_initial = absl::Milliseconds(200);
    absl::Duration backoff_max = absl::Seconds(5);
    // Sends of one request at most; past it the request is answered locally
    // with an INTERNAL_ERROR verdict, so one that breaks every stream it is
    // written to (a poison message) cannot circulate forever.
    int32_t max_attempts = 5;
    // See AFFINITY above. Off: round-robin only.
    bool task_affinity = false;
    int32_t task_affinity_slack = 4;
    // Plaintext, or TLS (and a token) towards the verifiers. A DNS target's
    // pods are dialled by address, and their certificates must carry the
    // target's name.
    ChannelSecurity security;
    // Called, before on_result, with each request the dispatcher answers
    // itself (refused as malformed, or unanswered after max_attempts) and
    // that verdict. Runs on a dispatcher thread: it must not block long.
    std::function<void(const v1::VerifyRequest&, const v1::VerifyResponse&)> on_local_answer;
  };
  struct Stats {
    uint64_t submitted = 0;
    uint64_t sent = 0;        // writes, re-sends included
    uint64_t resent = 0;
    uint64_t answered = 0;    // verdicts passed to on_result
    uint64_t duplicate_verdicts = 0;
    uint64_t rejected = 0;    // answered locally: the verifier refused them as malformed
    uint64_t undeliverable = 0;  // answered locally after max_attempts sends
    int64_t queued = 0;
    int64_t outstanding = 0;
    int64_t lanes_connected = 0;
    // Connected lanes the verifier has given credits: a lane is connected
    // before its first credit arrives, and only these take requests.
    int64_t lanes_with_credit = 0;
    std::map<std::string, uint64_t> sent_by_address;  // writes per verifier
  };
  using ResultCallback = std::function<void(const v1::VerifyResponse&)>;

  static absl::StatusOr<std::unique_ptr<VerifierDispatcher>> Create(Options options,
                                                                   ResultCallback on_result);
  ~VerifierDispatcher();  // stops and joins every thread; unanswered requests are dropped
  VerifierDispatcher(const VerifierDispatcher&) = delete;
  VerifierDispatcher& operator=(const VerifierDispatcher&) = delete;

  // INVALID_ARGUMENT for an empty or duplicate request_id; CANCELLED once
  // the dispatcher is stopping. With task_affinity, an `affinity_rank` above
  // 0 sends the request to that verifier in its task's ranking (1: the
  // second choice, where the first one's overflow goes) whatever its load,
  // when it has a credit; a warm-up so prepares the verifiers a task's
  // candidates will reach. A re-send goes as any other request.
  absl::Status Submit(v1::VerifyRequest request, int affinity_rank = 0);
  // Stops taking requests: Submit (waiting or not) returns CANCELLED. The
  // destructor does the rest; call this first when another thread may be
  // blocked in Submit.
  void Shutdown();
  // Waits until every submitted request was answered, or `timeout`.
  bool WaitIdle(absl::Duration timeout);
  Stats stats() const;

 private:
  struct Lane;
  struct Pending {
    v1::VerifyRequest request;
    int attempts = 0;
    std::string last_lane;  // re-sends prefer another lane
    int affinity_rank = 0;  // see Submit
  };
  struct Outstanding {
    Pending pending;
    std::string lane;
    absl::Time sent;
    uint64_t seq = 0;    // write order, across lanes
    bool acked = false;  // the verifier acknowledged receiving it
  };

  VerifierDispatcher(Options options, ResultCallback on_result);
  void DispatchLoop();
  void ReadLoop(Lane* lane);
  // Resolves the target and adds or retires lanes. Releases mu_ while it
  // resolves and dials: a slow DNS answer holds up no reader or producer.
  void Resolve() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts the lane's reader thread, which opens the stream without the
  // lock (a verifier slow to accept blocks only its own lane) and then
  // reads it.
  void Connect(Lane* lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OpenAndRead(Lane* lane) ABSL_LOCKS_EXCLUDED(mu_);
  // A lane with a credit for `pending`: its task's first lane in affinity
  // order within the slack (see AFFINITY), else the next in turn; never
  // the lane a re-sent request last went to while another is ready.
  Lane* PickLane(const Pending& pending)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves a lane's outstanding requests back to the front of the queue.
  void Requeue(const std::string& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RequeueOne(const std::string& id, bool resend) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Answer(const v1::VerifyResponse& response) ABSL_LOCKS_EXCLUDED(mu_);
  // A verdict the dispatcher gives itself, for `request`.
  void AnswerLocally(const v1::VerifyRequest& request, const v1::VerifyResponse& response)
      ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  const ResultCallback on_result_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Outstanding> outstanding_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> known_ids_ ABSL_GUARDED_BY(mu_);  // queued or outstanding
  // Recently answered ids (oldest evicted first), to drop late duplicates.
  absl::flat_hash_set<std::string> answered_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> answered_order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Lane>> lanes_ ABSL_GUARDED_BY(mu_);
  size_t next_lane_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_resolve_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread dispatch_thread_;
};

}  // namespace kforge

#endif  // KFORGE_ROLLOUT_WORKER_DISPATCH_VERIFIER_DISPATCHER_H_
