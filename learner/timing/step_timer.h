// StepTimer: adds up where one training step's time went (JobProgress.times,
// see StepTimes in proto/kforge/v1/job.proto for each figure's definition).
// It reads no clock: the trainer thread hands it the durations it measured
// and the step's samples, whose generation and verification stamps give the
// rollout and verification spans, so tests feed it made-up stamps.
//
//   StepTimer timer;
//   timer.AddWait(collected - asked);
//   for (const v1::ScoredSample& s : samples) timer.AddSample(s);
//   timer.AddTraining(trained - collected, stats.tokens * epochs);
//   timer.AddWeightSync(published - trained);
//   *progress.mutable_times() = timer.Finish(now - previous_step_end);
//
// Not thread-safe: one step, one thread (the trainer's).
#ifndef KFORGE_LEARNER_TIMING_STEP_TIMER_H_
#define KFORGE_LEARNER_TIMING_STEP_TIMER_H_

#include <cstdint>
#include <limits>

#include "absl/time/time.h"
#include "kforge/v1/job.pb.h"
#include "kforge/v1/sample.pb.h"

namespace kforge {

class StepTimer {
 public:
  // One sample of the step (trained or not). A sample without generation
  // stamps (a worker that predates them) counts in `samples` only; one
  // whose verdict no verifier stamped (answered by a dispatcher) is not a
  // verified candidate.
  void AddSample(const v1::ScoredSample& sample);
  // The learner waiting for complete, scored groups.
  void AddWait(absl::Duration waited) { wait_ += waited; }
  // Optimiser step(s) and the tokens they trained on (once per epoch).
  void AddTraining(absl::Duration took, int64_t tokens);
  // Snapshotting and broadcasting new weights.
  void AddWeightSync(absl::Duration took) { weight_sync_ += took; }

  // The step's figures; `step` is its cadence (StepTimes.step_seconds).
  v1::StepTimes Finish(absl::Duration step) const;

 private:
  // [first, last] over intervals added; empty while first > last.
  struct Span {
    int64_t first_us = std::numeric_limits<int64_t>::max();
    int64_t last_us = std::numeric_limits<int64_t>::min();
    void Add(int64_t start_us, int64_t end_us);
    double Seconds() const;
  };

  Span rollout_;
  Span verify_;
  int64_t samples_ = 0;
  int64_t samples_timed_ = 0;
  int64_t generated_tokens_ = 0;
  int64_t candidates_ = 0;
  // Generation finish to verification start, over samples with both.
  int64_t queued_ = 0;
  double queue_sum_s_ = 0;
  double queue_max_s_ = 0;
  absl::Duration wait_;
  absl::Duration train_;
  int64_t trained_tokens_ = 0;
  absl::Duration weight_sync_;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_TIMING_STEP_TIMER_H_
