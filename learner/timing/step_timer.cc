#include "learner/timing/step_timer.h"

#include <algorithm>

namespace kforge {
namespace {

// A rate over a time; 0 for an empty time (a step with nothing in it
// reports no throughput rather than infinity).
double PerSecond(double count, double seconds) { return seconds > 0 ? count / seconds : 0; }

}  // namespace

void StepTimer::Span::Add(int64_t start_us, int64_t end_us) {
  first_us = std::min(first_us, start_us);
  last_us = std::max(last_us, end_us);
}

double StepTimer::Span::Seconds() const {
  return last_us > first_us ? static_cast<double>(last_us - first_us) / 1e6 : 0;
}

void StepTimer::AddSample(const v1::ScoredSample& scored) {
  ++samples_;
  const v1::Sample& sample = scored.sample();
  // Both stamps, in order: a clock that stepped back between them would
  // stretch the span with a bogus interval.
  if (sample.started_at_us() > 0 && sample.finished_at_us() >= sample.started_at_us()) {
    ++samples_timed_;
    generated_tokens_ += sample.completion_tokens_size();
    rollout_.Add(sample.started_at_us(), sample.finished_at_us());
  }
  const v1::Verdict& verdict = scored.verdict();
  if (verdict.started_at_us() > 0 && verdict.finished_at_us() >= verdict.started_at_us()) {
    ++candidates_;
    verify_.Add(verdict.started_at_us(), verdict.finished_at_us());
    if (sample.finished_at_us() > 0) {
      const double queued =
          std::max<double>(0, static_cast<double>(verdict.started_at_us() - sample.finished_at_us()) / 1e6);
      ++queued_;
      queue_sum_s_ += queued;
      queue_max_s_ = std::max(queue_max_s_, queued);
    }
  }
}

void StepTimer::AddTraining(absl::Duration took, int64_t tokens) {
  train_ += took;
  trained_tokens_ += tokens;
}

v1::StepTimes StepTimer::Finish(absl::Duration step) const {
  v1::StepTimes times;
  times.set_step_seconds(absl::ToDoubleSeconds(step));
  times.set_rollout_seconds(rollout_.Seconds());
  times.set_generated_tokens(generated_tokens_);
  times.set_rollout_tokens_per_second(
      PerSecond(static_cast<double>(generated_tokens_), times.rollout_seconds()));
  times.set_verify_seconds(verify_.Seconds());
  times.set_candidates_verified(candidates_);
  times.set_verify_candidates_per_second(
      PerSecond(static_cast<double>(candidates_), times.verify_seconds()));
  times.set_train_seconds(absl::ToDoubleSeconds(train_));
  times.set_trained_tokens(trained_tokens_);
  times.set_train_tokens_per_second(
      PerSecond(static_cast<double>(trained_tokens_), times.train_seconds()));
  times.set_weight_sync_seconds(absl::ToDoubleSeconds(weight_sync_));
  times.set_learner_wait_seconds(absl::ToDoubleSeconds(wait_));
  times.set_samples(samples_);
  times.set_samples_timed(samples_timed_);
  times.set_verify_queue_mean_seconds(queued_ > 0 ? queue_sum_s_ / static_cast<double>(queued_) : 0);
  times.set_verify_queue_max_seconds(queue_max_s_);
  return times;
}

}  // namespace kforge
