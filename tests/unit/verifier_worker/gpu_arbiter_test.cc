// GpuArbiter: a timing stops the candidates' requests in flight instead of
// waiting for them, resumes them after and counts the stopped time; it
// waits for work that must not be stopped; no new work starts during it.
#include "verifier_worker/funnel/gpu_arbiter.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace kforge {
namespace {

// A child in its own process group, sleeping until killed.
class SleepingGroup {
 public:
  SleepingGroup() {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      for (;;) ::pause();
    }
    ::setpgid(pid_, pid_);
  }
  ~SleepingGroup() {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  int pid() const { return pid_; }
  // Waits (up to 5 s) for the state letter of /proc/<pid>/stat.
  bool Reaches(char state) const {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (absl::Now() < deadline) {
      if (State() == state) return true;
      absl::SleepFor(absl::Milliseconds(2));
    }
    return false;
  }

 private:
  char State() const {
    std::ifstream in(absl::StrCat("/proc/", pid_, "/stat"));
    std::stringstream text;
    text << in.rdbuf();
    const std::string stat = text.str();
    const size_t paren = stat.rfind(')');
    return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
  }
  int pid_ = -1;
};

TEST(GpuArbiterTest, ATimingStopsRequestsInFlightAndResumesThemCountingTheTime) {
  GpuArbiter gpu(/*stop_requests=*/true);
  SleepingGroup candidate;
  ::kill(candidate.pid(), SIGSTOP);  // idle, as a session leaves it
  ASSERT_TRUE(candidate.Reaches('T'));
  {
    GpuArbiter::Shared use(gpu, candidate.pid());
    EXPECT_TRUE(candidate.Reaches('S')) << "a shared use resumes its candidate";
    {
      GpuArbiter::Exclusive alone(gpu);  // does not wait for the request
      EXPECT_TRUE(candidate.Reaches('T')) << "a timing stops the requests in flight";
      EXPECT_EQ(alone.stopped_requests(), 1);
      absl::SleepFor(absl::Milliseconds(100));
    }
    EXPECT_TRUE(candidate.Reaches('S')) << "and resumes them after";
    EXPECT_GE(use.stopped(), absl::Milliseconds(100));
    EXPECT_LT(use.stopped(), absl::Seconds(5));
  }
  EXPECT_TRUE(candidate.Reaches('T')) << "idle again once its request is done";
}

TEST(GpuArbiterTest, ATimingWaitsForWorkThatCannotBeStoppedAndNewWorkWaitsForTheTiming) {
  GpuArbiter gpu(/*stop_requests=*/true);
  std::atomic<bool> timing_started{false};
  std::thread timing;
  {
    GpuArbiter::Shared reference(gpu, /*pgid=*/0);
    timing = std::thread([&] {
      GpuArbiter::Exclusive alone(gpu);
      timing_started = true;
      absl::SleepFor(absl::Milliseconds(200));
    });
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_FALSE(timing_started) << "the timing did not wait for the reference's work";
  }
  while (!timing_started) absl::SleepFor(absl::Milliseconds(1));
  absl::Duration waited;
  {
    GpuArbiter::Shared later(gpu, /*pgid=*/0, &waited);
  }
  EXPECT_GE(waited, absl::Milliseconds(50)) << "new work started during the timing";
  timing.join();
}

TEST(GpuArbiterTest, WhenNotStoppingRequestsATimingWaitsForThemToEnd) {
  GpuArbiter gpu(/*stop_requests=*/false);
  SleepingGroup candidate;
  std::atomic<bool> timing_started{false};
  std::thread timing;
  {
    GpuArbiter::Shared use(gpu, candidate.pid());
    EXPECT_TRUE(candidate.Reaches('S'));
    timing = std::thread([&] {
      GpuArbiter::Exclusive alone(gpu);
      EXPECT_EQ(alone.stopped_requests(), 0);
      timing_started = true;
    });
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_FALSE(timing_started) << "the timing did not wait for the request";
    EXPECT_TRUE(candidate.Reaches('S')) << "the request was stopped";
  }
  timing.join();
  EXPECT_TRUE(timing_started);
}

TEST(GpuArbiterTest, WhenNotStoppingRequestsATimingStillStopsPreemptibleOnesAtOnce) {
  GpuArbiter gpu(/*stop_requests=*/false);
  SleepingGroup warming;
  {
    GpuArbiter::Shared use(gpu, warming.pid(), nullptr, /*preemptible=*/true);
    EXPECT_TRUE(warming.Reaches('S'));
    {
      GpuArbiter::Exclusive alone(gpu);  // does not wait for it
      EXPECT_EQ(alone.stopped_requests(), 1);
      EXPECT_TRUE(warming.Reaches('T')) << "the preemptible request was not stopped";
      absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_TRUE(warming.Reaches('S')) << "and resumed after the timing";
    EXPECT_GE(use.stopped(), absl::Milliseconds(50));
  }
  // A request that is not preemptible is still waited for beside one that is.
  SleepingGroup running;
  std::atomic<bool> timing_started{false};
  std::thread timing;
  {
    GpuArbiter::Shared drained(gpu, running.pid());
    GpuArbiter::Shared preempted(gpu, warming.pid(), nullptr, /*preemptible=*/true);
    timing = std::thread([&] {
      GpuArbiter::Exclusive alone(gpu);
      timing_started = true;
    });
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_FALSE(timing_started) << "the timing did not wait for the other request";
  }
  timing.join();
  EXPECT_TRUE(timing_started);
}

// Polls `flag` for up to `limit`.
bool Becomes(const std::atomic<bool>& flag, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (!flag && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  return flag;
}

TEST(GpuArbiterTest, WhileAReferenceMakeHoldsTheGpuAWaitingTimingLetsRequestsButNotMoreMakesIn) {
  GpuArbiter gpu(/*stop_requests=*/false);
  SleepingGroup candidate;
  std::atomic<bool> timing_started{false};
  std::atomic<bool> second_make_started{false};
  std::atomic<bool> request_started{false};
  std::atomic<bool> request_done{false};
  std::thread timing;
  std::thread second_make;
  std::thread request;
  {
    GpuArbiter::Shared make(gpu, /*pgid=*/0);
    timing = std::thread([&] {
      GpuArbiter::Exclusive alone(gpu);
      timing_started = true;
    });
    while (gpu.timings_waiting() == 0) absl::SleepFor(absl::Milliseconds(1));
    second_make = std::thread([&] {
      GpuArbiter::Shared another(gpu, /*pgid=*/0);
      second_make_started = true;
    });
    request = std::thread([&] {
      GpuArbiter::Shared use(gpu, candidate.pid());
      request_started = true;
      while (!request_done) absl::SleepFor(absl::Milliseconds(1));
    });
    EXPECT_TRUE(Becomes(request_started, absl::Seconds(2)))
        << "the request queued behind the make and the timing waiting for it";
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_FALSE(second_make_started) << "a make started while a timing waited";
    EXPECT_FALSE(timing_started);
  }
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(timing_started) << "the timing did not wait for the request let in";
  EXPECT_FALSE(second_make_started);
  request_done = true;
  request.join();
  timing.join();
  EXPECT_TRUE(timing_started);
  second_make.join();
  EXPECT_TRUE(second_make_started);
  // Without a make holding the GPU, a request waits for a waiting timing as
  // before.
  SleepingGroup running;
  std::atomic<bool> later_started{false};
  std::thread later;
  {
    GpuArbiter::Shared drained(gpu, running.pid());
    timing = std::thread([&] { GpuArbiter::Exclusive alone(gpu); });
    while (gpu.timings_waiting() == 0) absl::SleepFor(absl::Milliseconds(1));
    later = std::thread([&] {
      GpuArbiter::Shared next(gpu, candidate.pid());
      later_started = true;
    });
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_FALSE(later_started) << "a request went ahead of a waiting timing with no make running";
  }
  timing.join();
  later.join();
  EXPECT_TRUE(later_started);
}

TEST(GpuArbiterTest, AProcessGroupHeldTwiceIsStoppedOnlyWhenTheLastUseEnds) {
  GpuArbiter gpu(/*stop_requests=*/false);
  SleepingGroup candidate;
  ::kill(candidate.pid(), SIGSTOP);
  ASSERT_TRUE(candidate.Reaches('T'));
  {
    // A background warm-up, held across the candidate's requests.
    GpuArbiter::Shared warming(gpu, candidate.pid(), nullptr, /*preemptible=*/true);
    EXPECT_TRUE(candidate.Reaches('S'));
    {
      GpuArbiter::Shared request(gpu, candidate.pid());
    }
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(candidate.Reaches('S')) << "a request's end stopped the warm-up still held";
    {
      GpuArbiter::Exclusive alone(gpu);  // another candidate's timing
      EXPECT_TRUE(candidate.Reaches('T')) << "a timing did not stop the warm-up";
    }
    EXPECT_TRUE(candidate.Reaches('S')) << "and did not resume it";
  }
  EXPECT_TRUE(candidate.Reaches('T')) << "idle again once the last use ended";
}

}  // namespace
}  // namespace kforge
