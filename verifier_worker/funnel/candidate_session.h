// One candidate's sandboxed child, forked by the zygote, and the private
// channel to it. Requests have wall-clock limits; past one the child's whole
// process group is killed. The destructor always kills and reaps it, so no
// candidate process outlives its verification.
//
//   KF_ASSIGN_OR_RETURN(auto session, CandidateSession::Start(zygote, config, timeout));
//
// It holds its zygote alive: a session (a spare kept ready, say) may outlive
// the funnel's switch to a restarted zygote.
//   absl::StatusOr<Frame> reply = session->Request(frame, absl::Seconds(60));
//   // DEADLINE_EXCEEDED: timed out (killed); UNAVAILABLE: it crashed or
//   // exited, and crash_description() says how.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_CANDIDATE_SESSION_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_CANDIDATE_SESSION_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "verifier_worker/sandbox/frame_channel.h"
#include "verifier_worker/sandbox/zygote_client.h"

namespace kforge {

class CandidateSession {
 public:
  // Forks the child and waits for its sandbox report ("ready").
  static absl::StatusOr<std::unique_ptr<CandidateSession>> Start(
      std::shared_ptr<ZygoteClient> zygote, const google::protobuf::Struct& config,
      absl::Duration timeout);
  CandidateSession(const CandidateSession&) = delete;
  CandidateSession& operator=(const CandidateSession&) = delete;
  ~CandidateSession();

  // The child's process group runs only during a request: it is resumed
  // (SIGCONT) before the request is sent and stopped (SIGSTOP) once the
  // reply is in. With `paused`, a GpuArbiter::Shared around the call
  // resumes it instead and may stop it in between; `paused` says for how
  // long so far, which extends the deadline.
  absl::StatusOr<Frame> Request(const Frame& request, absl::Duration timeout,
                                const std::function<absl::Duration()>& paused = nullptr);

  const Frame& ready() const { return ready_; }
  int pid() const { return pid_; }
  // The CPU time the kernel has charged to the child so far, every thread
  // of it, ended or running, read from outside (its process CPU clock):
  // unlike what the harness reports, nothing the candidate's code can reach
  // holds it. A red team forked work onto torch's inter-op thread; the
  // candidate's own process could also forge a count it sent.
  absl::StatusOr<absl::Duration> CpuTime() const;
  // After UNAVAILABLE: "exited with code 0 without a result", "killed by
  // signal 9 (Killed)", ...
  const std::string& crash_description() const { return crash_; }
  // The child exited with status 0 before answering (an early exit(0)).
  bool exited_cleanly_without_result() const { return clean_exit_; }
  // Why it was killed ("timeout"), empty if it was not.
  const std::string& kill_reason() const { return kill_reason_; }

 private:
  CandidateSession(std::shared_ptr<ZygoteClient> zygote, FrameChannel channel, int pid)
      : zygote_(std::move(zygote)), channel_(std::move(channel)), pid_(pid) {}
  void Kill(const std::string& reason);
  void Freeze(bool frozen);
  void CollectExit();

  std::shared_ptr<ZygoteClient> zygote_;
  FrameChannel channel_;
  int pid_;
  Frame ready_;
  std::string crash_;
  bool clean_exit_ = false;
  std::string kill_reason_;
  bool reaped_ = false;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_CANDIDATE_SESSION_H_
