// The verifier's handle on its zygote (harness/kforge_harness/zygote.py):
// stage-1 static checks and forking candidate children. One reader thread
// ("kf-zygote-read") receives replies and child-exit reports; callers wait
// on them with deadlines. Thread-safe.
//
//   KF_ASSIGN_OR_RETURN(auto zygote, ZygoteClient::Start(setup));
//   KF_ASSIGN_OR_RETURN(Frame result, zygote->StaticCheck(code, true, 262144));
//   KF_ASSIGN_OR_RETURN(int pid, zygote->Spawn(config, child_end.fd()));
#ifndef KFORGE_VERIFIER_WORKER_SANDBOX_ZYGOTE_CLIENT_H_
#define KFORGE_VERIFIER_WORKER_SANDBOX_ZYGOTE_CLIENT_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/process/child_process.h"
#include "verifier_worker/sandbox/harness_process.h"

namespace kforge {

class ZygoteClient {
 public:
  // Starts the zygote and waits (up to `start_timeout`) for it to answer.
  static absl::StatusOr<std::unique_ptr<ZygoteClient>> Start(const HarnessSetup& setup,
                                                             absl::Duration start_timeout);
  ZygoteClient(const ZygoteClient&) = delete;
  ZygoteClient& operator=(const ZygoteClient&) = delete;
  ~ZygoteClient();

  absl::StatusOr<Frame> StaticCheck(const std::string& source, bool require_triton,
                                    int64_t max_bytes, absl::Duration timeout);
  // Forks a candidate child that talks over `child_fd` (sent to the zygote,
  // then closed here by the caller). Returns its pid (= its process group).
  absl::StatusOr<int> Spawn(const google::protobuf::Struct& config, int child_fd,
                            absl::Duration timeout);
  // Fills `dir` with Triton's driver utilities and common launchers, built
  // by a trusted child that never sees candidate code (harness warmup.py).
  absl::StatusOr<Frame> FillTritonCache(const std::string& dir, const std::string& device,
                                        absl::Duration timeout);
  // Starts a trusted child building Triton launchers of `signatures` (a
  // list of lists of type names) into `dir`; its pid (its end comes as an
  // exit, WaitExit).
  absl::StatusOr<int> BuildLaunchers(const std::string& dir, const std::string& device,
                                     google::protobuf::Value signatures, absl::Duration timeout);
  // How the child `pid` ended, once the zygote has reaped it.
  std::optional<ExitInfo> WaitExit(int pid, absl::Duration timeout);
  bool alive() const;
  const Frame& hello() const { return hello_; }

 private:
  explicit ZygoteClient(HarnessProcess process);
  absl::StatusOr<Frame> Call(Frame request, int attach_fd, absl::Duration timeout);
  void ReadLoop();

  HarnessProcess process_;
  Frame hello_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, Frame> replies_ ABSL_GUARDED_BY(mu_);
  std::map<int, ExitInfo> exits_ ABSL_GUARDED_BY(mu_);
  bool dead_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex send_mu_;
  std::thread reader_;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_SANDBOX_ZYGOTE_CLIENT_H_
