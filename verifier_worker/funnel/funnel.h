// The five-stage verifier funnel for one candidate: static checks (in the
// zygote), then, in a fresh sandboxed child, compile, tiny run, multi-input
// correctness against references computed by the trusted reference server,
// and calibrated timing against eager and torch.compile baselines. Stops at
// the first stage that does not pass. Never throws and never fails as a
// whole: a verifier-side problem becomes OUTCOME_INTERNAL_ERROR.
//
//   KF_ASSIGN_OR_RETURN(auto funnel, Funnel::Create(config, &metrics));
//   v1::Verdict verdict = funnel->Verify(request);   // options already defaulted
//
// Thread-safe: up to `max_concurrent` candidates run stages 1-4 at once;
// timing takes the device alone. Reference work is shared between
// candidates of a task (ReferenceCache: inputs and reference outputs per
// epoch; BaselineCache: eager and torch.compile times), never repeated per
// candidate.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_FUNNEL_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_FUNNEL_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "kforge/v1/verifier_service.pb.h"
#include "verifier_worker/funnel/baseline_cache.h"
#include "verifier_worker/funnel/gpu_arbiter.h"
#include "verifier_worker/funnel/launcher_harvest.h"
#include "verifier_worker/funnel/reference_cache.h"
#include "verifier_worker/funnel/reference_prefetcher.h"
#include "verifier_worker/funnel/sandbox_pool.h"
#include "verifier_worker/funnel/verdict_cache.h"
#include "verifier_worker/sandbox/candidate_cgroup.h"
#include "verifier_worker/sandbox/reference_pool.h"
#include "verifier_worker/sandbox/zygote_client.h"
#include "verifier_worker/verifier_metrics.h"

namespace kforge {

// Per-candidate cgroups (memory and process limits of the whole tree).
enum class CgroupMode {
  kAuto,      // where this process may create them; rlimits otherwise
  kRequired,  // Create() fails where they cannot be made
  kOff,
};

// "auto", "required" or "off" (VerifierWorkerConfig.cgroups).
absl::StatusOr<CgroupMode> ParseCgroupMode(absl::string_view name);

struct FunnelConfig {
  HarnessSetup harness;
  std::string work_dir;  // per-candidate sandbox folders go under it
  int max_concurrent = 2;
  size_t cache_entries = 10000;
  absl::Duration start_timeout = absl::Seconds(120);
  int candidate_threads = 1;  // CPU threads a candidate may use
  CgroupMode cgroups = CgroupMode::kAuto;
  // Sandboxed candidate processes kept ready (on a GPU: CUDA context made,
  // Triton warmed) so a candidate does not wait for its process to start;
  // 0 starts each one when its candidate arrives.
  int spare_sandboxes = 0;
  // Host memory for the shared reference epochs (ReferenceCache).
  int64_t reference_cache_bytes = int64_t{8} << 30;
  // Trusted reference servers, tasks spread over them (ReferencePool).
  int reference_servers = 4;
  // Reference epochs of the next batch made ahead, at most this many queued
  // or running (VerifierWorkerConfig.reference_prefetch_queue); 0: none.
  int reference_prefetch_queue = 16;
  // A timing stops correctness requests in flight instead of waiting for
  // them (GpuArbiter; ServiceConfig.timing_stops_requests).
  bool timing_stops_requests = false;
  // Triton launcher signatures built ahead into the base cache at most
  // (VerifierWorkerConfig.triton_launchers); 0: none.
  int triton_launchers = 256;
  // Folders candidates must not read: the verifier's own TLS key and token
  // files (harness sandbox.py: Landlock then grants reads everywhere else).
  std::vector<std::string> secret_dirs;
};

class Funnel {
 public:
  // Starts the zygote and checks the reference server answers.
  static absl::StatusOr<std::unique_ptr<Funnel>> Create(FunnelConfig config,
                                                        VerifierMetrics* metrics);
  ~Funnel();

  kforge::v1::Verdict Verify(const kforge::v1::VerifyRequest& request);

  // "NVIDIA H100 80GB HBM3" or "cpu".
  const std::string& device_name() const { return device_name_; }
  bool healthy() const;
  // How candidates' memory and processes are bounded: "cgroup v2 at …", or
  // why cgroups are not used.
  const std::string& cgroup_report() const { return cgroup_report_; }
  // The trusted Triton cache every sandbox starts from: where it is, or
  // why there is none.
  const std::string& triton_cache_report() const { return triton_cache_report_; }
  // Triton launcher signatures candidates needed, kept to be built ahead.
  int triton_launchers_kept() const { return launchers_.kept(); }
  // Spares ready now, and where sandboxes came from so far.
  int spare_sandboxes_ready() const { return sandboxes_->ready(); }
  SandboxPool::Stats sandbox_stats() const { return sandboxes_->stats(); }
  std::vector<int> spare_sandbox_pids() const { return sandboxes_->spare_pids(); }
  // Reference epochs of next batches queued or being made ahead.
  int reference_prefetches_pending() const { return prefetcher_.pending(); }

 private:
  class Run;  // one verification, verification.h
  Funnel(FunnelConfig config, VerifierMetrics* metrics);
  absl::StatusOr<std::shared_ptr<ZygoteClient>> Zygote();
  absl::Status SetUpCgroups();
  void FillTritonBaseCache();
  // Starts building the launchers candidates needed since the last build
  // into the base cache, unless a build is still running (LauncherHarvest).
  void BuildPendingLaunchers();
  // A new sandbox: folder, cgroup, child process (which copies the Triton
  // base cache into its own folder before it is confined).
  absl::StatusOr<std::unique_ptr<CandidateSandbox>> MakeSandbox(const v1::SandboxLimits& limits,
                                                                bool spare);
  // reference_stage.cc: the ReferenceCache scope of a request's task (its
  // reference and input-plan options); a new epoch for `request`'s task
  // (`ahead`: for a batch whose candidates have not come yet); and the
  // epoch of the request's next batch (in `scope`, the request's) queued to
  // be made ahead, if it names one this verifier does not hold.
  static std::string ReferenceScope(const v1::VerifyRequest& request);
  absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> MakeReferenceEpoch(
      const v1::VerifyRequest& request, bool ahead, absl::Duration& device_wait);
  void PrefetchNextReference(const v1::VerifyRequest& request, const std::string& scope);

  const FunnelConfig config_;
  VerifierMetrics* const metrics_;  // may be null
  ReferencePool reference_;
  VerdictCache cache_;
  ReferenceCache references_;
  BaselineCache baselines_;
  std::string device_name_;
  std::string library_versions_;
  std::unique_ptr<CgroupRoot> cgroups_;  // null: rlimits only
  std::string cgroup_report_;
  std::string triton_base_cache_;  // empty: none
  std::string triton_cache_report_;
  LauncherHarvest launchers_;
  absl::Mutex launcher_build_mu_;
  // The build running, if any: its pid in the zygote that forked it (a
  // zygote started again never reports the old one's children).
  int launcher_builder_pid_ ABSL_GUARDED_BY(launcher_build_mu_) = 0;
  std::shared_ptr<ZygoteClient> launcher_builder_zygote_ ABSL_GUARDED_BY(launcher_build_mu_);
  absl::Time launcher_build_started_ ABSL_GUARDED_BY(launcher_build_mu_);
  bool has_compile_ = false;
  mutable absl::Mutex zygote_mu_;
  // Shared with the candidate sessions it forked (see CandidateSession).
  std::shared_ptr<ZygoteClient> zygote_ ABSL_GUARDED_BY(zygote_mu_);
  // Correctness requests share the GPU; a timing has it alone.
  GpuArbiter gpu_;
  absl::Mutex slots_mu_;
  absl::CondVar slot_freed_;
  int free_slots_ ABSL_GUARDED_BY(slots_mu_);
  std::atomic<int64_t> next_candidate_{1};
  // Its thread makes epochs with the members above, so it stops before them.
  ReferencePrefetcher prefetcher_;
  // Last: its filler thread uses the members above, so it stops first.
  std::unique_ptr<SandboxPool> sandboxes_;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_FUNNEL_H_
