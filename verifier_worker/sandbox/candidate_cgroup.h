// Per-candidate cgroups: the memory and process limits of a candidate's whole
// process tree. RLIMIT_AS cannot do this job (CUDA reserves terabytes of
// address space), and RLIMIT_NPROC counts per user and is ignored for root;
// a cgroup bounds exactly the candidate's tree and tells afterwards whether
// the limit is what killed it.
//
//   KF_ASSIGN_OR_RETURN(auto root, CgroupRoot::Discover("kforge-verifier-123"));
//   KF_ASSIGN_OR_RETURN(auto cg, root->Create("c7", 8 << 30, 64));
//   // the child writes its pid into each of cg->procs_files() before its code
//   // loads; afterwards:
//   if (cg->oom_killed()) ...;
//   cg.reset();  // kills what is left in it and removes it
//
// Works with the unified hierarchy (cgroup v2, what Kubernetes nodes run now)
// and with the v1 memory and pids controllers. Discover() fails with the
// reason where neither is writable (an unprivileged container with a
// read-only /sys/fs/cgroup); the funnel then falls back to rlimits and says
// so in every sandbox report.
#ifndef KFORGE_VERIFIER_WORKER_SANDBOX_CANDIDATE_CGROUP_H_
#define KFORGE_VERIFIER_WORKER_SANDBOX_CANDIDATE_CGROUP_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kforge {

class CandidateCgroup {
 public:
  CandidateCgroup(const CandidateCgroup&) = delete;
  CandidateCgroup& operator=(const CandidateCgroup&) = delete;
  // Kills every process still in it and removes its folders.
  ~CandidateCgroup();

  // Controller ("memory", "pids", or "memory+pids" on v2) -> the
  // cgroup.procs file a process writes its pid into to join.
  const std::map<std::string, std::string>& procs_files() const { return procs_files_; }
  // The kernel killed a process of the tree for exceeding the memory limit.
  bool oom_killed() const;
  // A fork or clone failed because of the process limit.
  bool process_limit_hit() const;
  // SIGKILLs every process in it (the candidate's tree, wherever it moved
  // its process groups).
  void KillAll() const;

 private:
  friend class CgroupRoot;
  CandidateCgroup(std::filesystem::path memory_dir, std::filesystem::path pids_dir, bool unified);

  const std::filesystem::path memory_dir_;
  const std::filesystem::path pids_dir_;  // == memory_dir_ on v2
  const bool unified_;
  std::map<std::string, std::string> procs_files_;
};

class CgroupRoot {
 public:
  // Makes `name` under this process's own cgroup (v2) or under its memory
  // and pids cgroups (v1), with the memory and pids controllers delegated to
  // it. On v2, where the controllers cannot be enabled while this process's
  // cgroup holds processes, those processes move to a leaf named
  // "<name>-service" first.
  static absl::StatusOr<std::unique_ptr<CgroupRoot>> Discover(const std::string& name);
  CgroupRoot(const CgroupRoot&) = delete;
  CgroupRoot& operator=(const CgroupRoot&) = delete;
  ~CgroupRoot();  // removes its folders (empty by then)

  // A child cgroup limited to `memory_bytes` (swap off where settable) and
  // `max_processes`.
  absl::StatusOr<std::unique_ptr<CandidateCgroup>> Create(const std::string& name,
                                                          int64_t memory_bytes,
                                                          int max_processes) const;
  // "cgroup v2 at /sys/fs/cgroup/…" or "cgroup v1 memory at …, pids at …".
  std::string Describe() const;

 private:
  CgroupRoot(std::filesystem::path memory_dir, std::filesystem::path pids_dir, bool unified)
      : memory_dir_(std::move(memory_dir)), pids_dir_(std::move(pids_dir)), unified_(unified) {}

  const std::filesystem::path memory_dir_;
  const std::filesystem::path pids_dir_;
  const bool unified_;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_SANDBOX_CANDIDATE_CGROUP_H_
