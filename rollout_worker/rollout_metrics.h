// Every metric family the rollout worker exports, declared in one place with
// the kforge_rollout_ prefix. Counters follow the generator's and the
// dispatcher's own tallies: Update() adds what changed since the last call.
#ifndef KFORGE_ROLLOUT_WORKER_ROLLOUT_METRICS_H_
#define KFORGE_ROLLOUT_WORKER_ROLLOUT_METRICS_H_

#include <string>
#include <cstdint>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/time/time.h"
#include "model/generation/generator.h"
#include "rollout_worker/dispatch/verifier_dispatcher.h"
#include "rollout_worker/sampler/rollout_engine.h"

namespace kforge {

class RolloutMetrics {
 public:
  explicit RolloutMetrics(prometheus::Registry& registry);

  void ObserveTimeToFirstToken(absl::Duration ttft);
  // From a weight fetch's (or broadcast's) start to the new weights
  // applied; `path` is "grpc" or "nccl".
  void ObserveWeightUpdate(absl::Duration took, const char* path);
  // A sample the dispatcher answered itself (no verifier took it), handed
  // to the learner: the learner's ack in lower case ("accepted", ...), or
  // "failed" when it could not be reached (its group is then released).
  void RecordLocalDelivery(const std::string& result);
  // From one thread (the metrics ticker).
  void Update(const GeneratorStats& generator, const VerifierDispatcher::Stats& dispatcher,
              int64_t groups_in_flight, const RolloutEngine::SamplerTimes& sampler);

  prometheus::Counter& groups_dropped;
  // Groups given back to the learner (ReleaseWork) and taken by it.
  prometheus::Counter& groups_released;
  prometheus::Counter& work_items_rejected;
  prometheus::Gauge& weight_version;
  // 1 while the worker is a member of the learner's weight-broadcast group.
  prometheus::Gauge& broadcast_member;
  // Group joins and broadcast receives that failed or timed out.
  prometheus::Counter& broadcast_failures;

 private:
  prometheus::Counter& generated_tokens_;
  prometheus::Counter& prefill_tokens_;
  prometheus::Counter& decode_steps_;
  prometheus::Gauge& batch_occupancy_;
  prometheus::Gauge& kv_cache_tokens_;
  prometheus::Gauge& kv_cache_capacity_;
  prometheus::Gauge& waiting_groups_;
  prometheus::Gauge& groups_in_flight_;
  prometheus::Family<prometheus::Counter>& decode_steps_by_mode_;
  prometheus::Counter& decode_graph_captures_;
  prometheus::Gauge& decode_graphs_;
  prometheus::Histogram& time_to_first_token_;
  prometheus::Histogram& weight_update_;
  prometheus::Family<prometheus::Counter>& weight_updates_;
  prometheus::Family<prometheus::Counter>& samples_;
  prometheus::Family<prometheus::Counter>& local_deliveries_;
  prometheus::Gauge& samples_outstanding_;
  prometheus::Family<prometheus::Counter>& sampler_seconds_;
  GeneratorStats last_generator_;
  RolloutEngine::SamplerTimes last_sampler_;
  VerifierDispatcher::Stats last_dispatcher_;
};

}  // namespace kforge

#endif  // KFORGE_ROLLOUT_WORKER_ROLLOUT_METRICS_H_
