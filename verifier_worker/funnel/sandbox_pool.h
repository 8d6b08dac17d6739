// Where candidates' sandboxes come from: made when a candidate needs one, or
// taken from a few spares kept ready beforehand. A spare is a fresh
// sandboxed child that has never seen candidate code; on a GPU it has
// already created its CUDA context and made one trusted Triton launch
// (harness warmup.py), seconds that would otherwise sit on every
// candidate's critical path. Each sandbox still serves exactly one
// candidate.
//
//   SandboxPool pool({.spares = 2, .make = make}, default_limits);
//   KF_ASSIGN_OR_RETURN(std::unique_ptr<CandidateSandbox> box, pool.Take(limits));
//   box->session->Request(...);
//
// A spare is used only for a request with the same process limits it was
// made with (memory, processes, open files, file size), and only after it answers a ping (a spare that died while idle is
// replaced, never blamed on the next candidate). Filler threads
// ("kf-spares-N", one per spare, so spares are made in parallel as fast as
// candidates use them) make spares with the limits of the latest request.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_SANDBOX_POOL_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_SANDBOX_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kforge/v1/verifier_options.pb.h"
#include "verifier_worker/funnel/candidate_session.h"
#include "verifier_worker/sandbox/candidate_cgroup.h"

namespace kforge {

// One candidate's sandbox: its folder, its cgroup (null where cgroups are
// unusable) and its child process. The destructor kills and reaps the
// child, lets the cgroup kill anything left, then removes the folder.
struct CandidateSandbox {
  CandidateSandbox() = default;
  CandidateSandbox(const CandidateSandbox&) = delete;
  CandidateSandbox& operator=(const CandidateSandbox&) = delete;
  ~CandidateSandbox();

  std::string work_dir;
  // Made ahead of its candidate and warmed (Take set it).
  bool was_spare = false;
  // Declared before session: destroyed after it.
  std::unique_ptr<CandidateCgroup> cgroup;
  std::unique_ptr<CandidateSession> session;
};

class SandboxPool {
 public:
  // Makes one sandbox with these limits; `spare` is true when the filler
  // thread asks (the maker then also waits for the device, which timing
  // may hold alone).
  using Maker = std::function<absl::StatusOr<std::unique_ptr<CandidateSandbox>>(
      const v1::SandboxLimits& limits, bool spare)>;

  struct Options {
    int spares = 0;  // 0: every sandbox is made on demand, no threads
    Maker make;
    // How long a spare may take to answer the ping before it is replaced.
    absl::Duration ping_timeout = absl::Seconds(5);
    // Wait before trying again after a spare could not be made.
    absl::Duration retry_after = absl::Seconds(1);
  };

  struct Stats {
    int64_t from_spares = 0;
    int64_t made_on_demand = 0;
    // Spares dropped: dead at their ping, or made with other limits.
    int64_t spares_discarded = 0;
  };

  // `limits` (defaults applied) are the ones the first spares are made with.
  SandboxPool(Options options, const v1::SandboxLimits& limits);
  ~SandboxPool();
  SandboxPool(const SandboxPool&) = delete;
  SandboxPool& operator=(const SandboxPool&) = delete;

  absl::StatusOr<std::unique_ptr<CandidateSandbox>> Take(const v1::SandboxLimits& limits);

  int ready() const;
  Stats stats() const;
  // The spares' process ids, oldest first (what operators see in `ps`).
  std::vector<int> spare_pids() const;

 private:
  struct Spare {
    v1::SandboxLimits limits;
    std::unique_ptr<CandidateSandbox> sandbox;
  };
  void FillLoop();

  const Options options_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  std::deque<Spare> spares_ ABSL_GUARDED_BY(mu_);
  v1::SandboxLimits wanted_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  // Spares being made now (counted toward options_.spares).
  int making_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> fillers_;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_SANDBOX_POOL_H_
