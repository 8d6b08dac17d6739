#include "verifier_worker/funnel/sandbox_pool.h"

#include <pthread.h>

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

// The limits a sandbox is made with; timeouts and source size apply per
// request and do not make a spare unusable.
bool SameLimits(const v1::SandboxLimits& a, const v1::SandboxLimits& b) {
  return a.memory_bytes() == b.memory_bytes() && a.max_processes() == b.max_processes() &&
         a.max_open_files() == b.max_open_files() && a.max_file_bytes() == b.max_file_bytes();
}

}  // namespace

CandidateSandbox::~CandidateSandbox() {
  session.reset();
  cgroup.reset();
  if (!work_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(work_dir, ec);
  }
}

SandboxPool::SandboxPool(Options options, const v1::SandboxLimits& limits)
    : options_(std::move(options)), wanted_(limits) {
  for (int i = 0; i < options_.spares; ++i) {
    fillers_.emplace_back([this, i] {
      pthread_setname_np(pthread_self(), absl::StrCat("kf-spares-", i).substr(0, 15).c_str());
      FillLoop();
    });
  }
}

SandboxPool::~SandboxPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    changed_.SignalAll();
  }
  for (std::thread& filler : fillers_) filler.join();
}

absl::StatusOr<std::unique_ptr<CandidateSandbox>> SandboxPool::Take(
    const v1::SandboxLimits& limits) {
  while (true) {
    Spare spare;
    std::deque<Spare> outdated;  // destroyed (killed, reaped) after the lock
    {
      absl::MutexLock lock(&mu_);
      if (!SameLimits(wanted_, limits)) {
        // The job's limits changed: spares made with the old ones go, and
        // the filler makes new ones with these.
        wanted_ = limits;
        stats_.spares_discarded += static_cast<int64_t>(spares_.size());
        outdated.swap(spares_);
        changed_.SignalAll();
      }
      if (spares_.empty()) {
        ++stats_.made_on_demand;
        break;
      }
      spare = std::move(spares_.front());
      spares_.pop_front();
      changed_.SignalAll();  // room for another
    }
    absl::StatusOr<Frame> pong =
        spare.sandbox->session->Request(Frame::Of("ping"), options_.ping_timeout);
    absl::MutexLock lock(&mu_);
    if (pong.ok() && pong->type() == "pong") {
      ++stats_.from_spares;
      spare.sandbox->was_spare = true;
      return std::move(spare.sandbox);
    }
    ++stats_.spares_discarded;  // died while idle: the next one, or a new one
  }
  return options_.make(limits, false);
}

void SandboxPool::FillLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    while (!stopping_ && static_cast<int>(spares_.size()) + making_ >= options_.spares) {
      changed_.Wait(&mu_);
    }
    if (stopping_) return;
    const v1::SandboxLimits limits = wanted_;
    absl::StatusOr<std::unique_ptr<CandidateSandbox>> made;
    ++making_;
    {
      mu_.Unlock();
      made = options_.make(limits, true);
      mu_.Lock();
    }
    --making_;
    if (!made.ok()) {
      // The zygote may be restarting; the funnel reports its own errors
      // when a candidate asks. Try again later, not in a tight loop.
      changed_.WaitWithTimeout(&mu_, options_.retry_after);
      continue;
    }
    if (stopping_ || !SameLimits(limits, wanted_)) {
      ++stats_.spares_discarded;
      std::unique_ptr<CandidateSandbox> unused = *std::move(made);
      mu_.Unlock();
      unused.reset();  // killing and reaping it waits on the zygote
      mu_.Lock();
      continue;
    }
    spares_.push_back({limits, *std::move(made)});
  }
}

int SandboxPool::ready() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(spares_.size());
}

std::vector<int> SandboxPool::spare_pids() const {
  absl::MutexLock lock(&mu_);
  std::vector<int> pids;
  for (const Spare& spare : spares_) pids.push_back(spare.sandbox->session->pid());
  return pids;
}

SandboxPool::Stats SandboxPool::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace kforge
