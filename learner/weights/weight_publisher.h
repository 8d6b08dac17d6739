// The learner's newest policy weights, as the trainer publishes them after
// each update and LearnerService.GetWeights streams them to rollout workers
// (the gRPC path of the weight broadcast: CPU runs, late joiners, workers
// without NCCL). Only the newest version is kept; a stream already running
// holds its snapshot alive until it ends.
//
//   publisher.Publish(*WeightSnapshot::Capture(policy, job_id, version));   // trainer
//   std::shared_ptr<const WeightSnapshot> newest = publisher.Latest();       // GetWeights
//
// Thread-safe.
#ifndef KFORGE_LEARNER_WEIGHTS_WEIGHT_PUBLISHER_H_
#define KFORGE_LEARNER_WEIGHTS_WEIGHT_PUBLISHER_H_

#include <cstdint>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "model/weights/weight_stream.h"

namespace kforge {

class WeightPublisher {
 public:
  void Publish(std::shared_ptr<const WeightSnapshot> snapshot) {
    absl::MutexLock lock(&mu_);
    latest_ = std::move(snapshot);
  }
  // Null when no job is training.
  std::shared_ptr<const WeightSnapshot> Latest() const {
    absl::MutexLock lock(&mu_);
    return latest_;
  }
  // The newest version, 0 when none.
  int64_t version() const {
    absl::MutexLock lock(&mu_);
    return latest_ == nullptr ? 0 : latest_->version();
  }
  void Clear() { Publish(nullptr); }

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const WeightSnapshot> latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_WEIGHTS_WEIGHT_PUBLISHER_H_
