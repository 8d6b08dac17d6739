// An exclusive lock on a folder, held for the life of the object, so one
// process at a time owns the state in it (as Prometheus locks its data
// folder). The lock is flock(2) on `<dir>/<name>`: the kernel drops it when
// the process dies, however it dies, so a crash never leaves a stale lock to
// clean up. The file records the holder ("pid 1234 on host learner-0 since
// 2026-11-25T21:00:00Z, kforge-learner"), which a refused second process
// names in its error.
//
//   KF_ASSIGN_OR_RETURN(std::unique_ptr<StateLock> lock,
//                       StateLock::Acquire(config.state_dir(), "kforge-learner"));
//   // FAILED_PRECONDITION: state folder /var/lib/kforge is in use by pid 1234
//   //   on host learner-0 since ... (kforge-learner); lock file /var/lib/kforge/LOCK
//
// Children do not inherit it (close-on-exec). flock is per host: on NFS v4
// Linux maps it to a lease-backed POSIX lock the server enforces, on NFS v3
// without a lock manager it is local to each client.
#ifndef KFORGE_COMMON_PROCESS_STATE_LOCK_H_
#define KFORGE_COMMON_PROCESS_STATE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/process/unique_fd.h"

namespace kforge {

class StateLock {
 public:
  // Creates `dir` when missing. FAILED_PRECONDITION naming the holder when
  // another process holds the lock.
  static absl::StatusOr<std::unique_ptr<StateLock>> Acquire(const std::string& dir,
                                                            const std::string& owner,
                                                            const std::string& name = "LOCK");

  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;
  ~StateLock() = default;  // closing the descriptor releases the lock

  const std::string& path() const { return path_; }

 private:
  StateLock(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}

  std::string path_;
  UniqueFd fd_;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_PROCESS_STATE_LOCK_H_
