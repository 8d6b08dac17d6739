#include "verifier_worker/funnel/candidate_session.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

// How long a dead child's exit report may take to arrive from the zygote.
constexpr absl::Duration kExitReportWait = absl::Seconds(5);

}  // namespace

absl::StatusOr<std::unique_ptr<CandidateSession>> CandidateSession::Start(
    std::shared_ptr<ZygoteClient> zygote, const google::protobuf::Struct& config,
    absl::Duration timeout) {
  KF_ASSIGN_OR_RETURN(auto pair, FrameChannel::Pair());
  KF_ASSIGN_OR_RETURN(int pid, zygote->Spawn(config, pair.second.fd(), timeout));
  // Only the child holds the other end now, so its death reads as EOF here.
  pair.second.Release().Reset();
  std::unique_ptr<CandidateSession> session(
      new CandidateSession(std::move(zygote), std::move(pair.first), pid));
  absl::StatusOr<Frame> ready = session->channel_.Receive(absl::Now() + timeout);
  if (!ready.ok() || ready->type() != "ready") {
    session->CollectExit();
    return absl::UnavailableError(absl::StrCat(
        "the candidate process did not start: ",
        ready.ok() ? ready->GetString("message") : std::string(ready.status().message()), " ",
        session->crash_));
  }
  session->ready_ = *std::move(ready);
  return session;
}

CandidateSession::~CandidateSession() {
  if (!reaped_) {
    (void)channel_.Send(Frame::Of("exit"));
    Kill("");
  }
}

void CandidateSession::Kill(const std::string& reason) {
  if (!reason.empty() && kill_reason_.empty()) kill_reason_ = reason;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  CollectExit();
}

void CandidateSession::CollectExit() {
  if (reaped_) return;
  reaped_ = true;
  std::optional<ExitInfo> exit = zygote_->WaitExit(pid_, kExitReportWait);
  if (!exit.has_value()) {
    ::kill(-pid_, SIGKILL);
    crash_ = "ended, exit status unknown";
    return;
  }
  clean_exit_ = exit->exited && exit->code == 0;
  crash_ = clean_exit_ ? "exited with code 0 without a result" : exit->Describe();
  if (!exit->exited && exit->signal == SIGKILL && kill_reason_.empty()) {
    crash_ += " (not by the verifier: likely the memory or process limit)";
  }
}

absl::StatusOr<absl::Duration> CandidateSession::CpuTime() const {
  clockid_t clock;
  if (const int err = ::clock_getcpuclockid(pid_, &clock); err != 0) {
    return absl::UnavailableError(absl::StrCat("the CPU clock of the candidate process ", pid_,
                                               ": ", std::strerror(err)));
  }
  timespec now{};
  if (::clock_gettime(clock, &now) != 0) {
    return absl::UnavailableError(absl::StrCat("reading the CPU clock of the candidate process ",
                                               pid_, ": ", std::strerror(errno)));
  }
  return absl::DurationFromTimespec(now);
}

void CandidateSession::Freeze(bool frozen) {
  // The whole group: the child cannot leave it (setsid and setpgid are
  // refused by its seccomp filter), so whatever it forked stops too.
  ::kill(-pid_, frozen ? SIGSTOP : SIGCONT);
}

absl::StatusOr<Frame> CandidateSession::Request(const Frame& request, absl::Duration timeout,
                                                const std::function<absl::Duration()>& paused) {
  if (reaped_) return absl::UnavailableError(absl::StrCat("the candidate process ", crash_));
  if (!paused) Freeze(false);
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status sent = channel_.Send(request, request.AttachedFds());
  absl::StatusOr<Frame> reply =
      sent.ok() ? channel_.Receive([&] { return paused ? deadline + paused() : deadline; })
                : absl::StatusOr<Frame>(sent);
  if (reply.ok()) {
    // Between requests the candidate does nothing: a thread it left behind
    // cannot load the GPU while another candidate is timed, nor compute
    // anything the verifier did not ask for and watch.
    Freeze(true);
    // Sealed before a byte is read: from here on nothing the candidate left
    // running (or mapped) can change what is compared.
    if (absl::Status adopted = AdoptReplyBuffer(request, *reply); !adopted.ok()) {
      if (absl::IsDataLoss(adopted)) {
        Kill("garbage on the result channel");
        return absl::UnavailableError(
            absl::StrCat("garbage on the result channel: ", adopted.message()));
      }
      Kill("reply buffer not released");
      return absl::UnavailableError(
          absl::StrCat("the candidate's reply could not be read safely: ", adopted.message()));
    }
    return reply;
  }
  if (absl::IsDeadlineExceeded(reply.status())) {
    Kill("timeout");
    return absl::DeadlineExceededError(absl::StrCat(
        "no answer within ", absl::FormatDuration(timeout), "; its process group was killed"));
  }
  if (absl::IsDataLoss(reply.status())) {
    Kill("garbage on the result channel");
    return absl::UnavailableError(
        absl::StrCat("garbage on the result channel: ", reply.status().message()));
  }
  CollectExit();
  return absl::UnavailableError(absl::StrCat("the candidate process ", crash_));
}

}  // namespace kforge
