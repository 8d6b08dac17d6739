#include "rollout_worker/rollout_metrics.h"

#include "common/metrics/metric_builders.h"

namespace kforge {
RolloutMetrics::RolloutMetrics(prometheus::Registry& registry)
    : groups_dropped(
          NewCounter(registry, "kforge_rollout_groups_dropped_total",
                     "Groups abandoned after a sampling failure (the learner re-issues them).")),
      groups_released(NewCounter(registry, "kforge_rollout_groups_released_total",
                                 "Groups given back to the learner (ReleaseWork) for an "
                                 "immediate re-issue.")),
      work_items_rejected(NewCounter(registry, "kforge_rollout_work_items_rejected_total",
                                     "Work items refused as malformed.")),
      weight_version(NewGauge(registry, "kforge_rollout_weight_version",
                              "Policy version of the weights the worker samples with.")),
      broadcast_member(NewGauge(registry, "kforge_rollout_broadcast_member",
                                "1 while the worker is in the learner's NCCL weight-broadcast "
                                "group.")),
      broadcast_failures(NewCounter(registry, "kforge_rollout_broadcast_failures_total",
                                    "NCCL group joins and weight-broadcast receives that failed or "
                                    "timed out (the worker then re-joins; weights come over gRPC "
                                    "meanwhile).")),
      generated_tokens_(NewCounter(registry, "kforge_rollout_generated_tokens_total",
                                   "Completion tokens sampled.")),
      prefill_tokens_(NewCounter(registry, "kforge_rollout_prefill_tokens_total",
                                 "Prompt tokens prefilled (once per group).")),
      decode_steps_(
          NewCounter(registry, "kforge_rollout_decode_steps_total", "Batched decode steps run.")),
      batch_occupancy_(NewGauge(registry, "kforge_rollout_batch_occupancy_ratio",
                                "Running sequences over the generator's slots.")),
      kv_cache_tokens_(
          NewGauge(registry, "kforge_rollout_kv_cache_tokens", "Tokens held in the KV cache.")),
      kv_cache_capacity_(NewGauge(registry, "kforge_rollout_kv_cache_capacity_tokens",
                                  "Tokens the KV cache can hold (slots x sequence length).")),
      waiting_groups_(NewGauge(registry, "kforge_rollout_waiting_groups",
                               "Groups queued for free KV cache slots.")),
      groups_in_flight_(NewGauge(registry, "kforge_rollout_groups_in_flight",
                                 "Groups taken from the learner and not yet fully sampled.")),
      decode_steps_by_mode_(NewCounterFamily(registry, "kforge_rollout_decode_step_runs_total",
                                             "Decode steps by how they ran: graph (replayed from a "
                                             "CUDA graph) or eager.")),
      decode_graph_captures_(NewCounter(registry, "kforge_rollout_decode_graph_captures_total",
                                        "Decode steps captured as CUDA graphs.")),
      decode_graphs_(
          NewGauge(registry, "kforge_rollout_decode_graphs", "CUDA graphs of decode steps held.")),
      time_to_first_token_(
          NewHistogram(registry, "kforge_rollout_time_to_first_token_seconds",
                       "From a group's arrival at the generator to its first token.",
                       {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60})),
      weight_update_(NewHistogram(registry, "kforge_rollout_weight_update_seconds",
                                  "From the start of a weight fetch to the new weights applied "
                                  "between two decode steps.",
                                  {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120})),
      weight_updates_(NewCounterFamily(registry, "kforge_rollout_weight_updates_total",
                                       "New weights applied, by how they came: nccl (broadcast "
                                       "into the live parameters) or grpc (GetWeights).")),
      samples_(NewCounterFamily(registry, "kforge_rollout_samples_total",
                                "Samples by what happened to them on the way to the verifiers: "
                                "submitted, sent (re-sends included), resent, answered, "
                                "refused (the verifier refused the request; answered locally), "
                                "undeliverable (no verdict after every attempt; answered "
                                "locally).")),
      local_deliveries_(NewCounterFamily(
          registry, "kforge_rollout_local_deliveries_total",
          "Samples no verifier took (refused or undeliverable), delivered to the learner by "
          "the worker with its own verdict, by the learner's ack; failed: the learner could not "
          "be reached, and the sample's group was given back for an immediate re-issue.")),
      samples_outstanding_(
          NewGauge(registry, "kforge_rollout_samples_outstanding",
                   "Samples sent or queued for verifiers without a verdict yet.")),
      sampler_seconds_(NewCounterFamily(
          registry, "kforge_rollout_sampler_seconds_total",
          "Wall time of the sampler thread (the worker's GPU) by state: generating "
          "(admission, prefill, decode steps), between_steps (applying new weights), "
          "idle (nothing to decode: waiting for work or weights).")) {
  // Every series exists from the first scrape, at zero.
  for (const char* event :
       {"submitted", "sent", "resent", "answered", "refused", "undeliverable"}) {
    samples_.Add({{"event", event}});
  }
  for (const char* result : {"accepted", "duplicate", "stale", "orphaned", "rejected", "failed"}) {
    local_deliveries_.Add({{"result", result}});
  }
  for (const char* mode : {"graph", "eager"}) decode_steps_by_mode_.Add({{"mode", mode}});
  for (const char* path : {"nccl", "grpc"}) weight_updates_.Add({{"path", path}});
  for (const char* state : {"generating", "between_steps", "idle"}) {
    sampler_seconds_.Add({{"state", state}});
  }
}

void RolloutMetrics::ObserveWeightUpdate(absl::Duration took, const char* path) {
  weight_update_.Observe(absl::ToDoubleSeconds(took));
  weight_updates_.Add({{"path", path}}).Increment();
}

void RolloutMetrics::RecordLocalDelivery(const std::string& result) {
  local_deliveries_.Add({{"result", result}}).Increment();
}

void RolloutMetrics::ObserveTimeToFirstToken(absl::Duration ttft) {
  time_to_first_token_.Observe(absl::ToDoubleSeconds(ttft));
}

void RolloutMetrics::Update(const GeneratorStats& g, const VerifierDispatcher::Stats& d,
                            int64_t groups_in_flight, const RolloutEngine::SamplerTimes& sampler) {
  IncrementToward(sampler_seconds_.Add({{"state", "generating"}}), sampler.generating,
                  last_sampler_.generating);
  IncrementToward(sampler_seconds_.Add({{"state", "between_steps"}}), sampler.between_steps,
                  last_sampler_.between_steps);
  IncrementToward(sampler_seconds_.Add({{"state", "idle"}}), sampler.idle, last_sampler_.idle);
  last_sampler_ = sampler;
  IncrementToward(generated_tokens_, g.generated_tokens, last_generator_.generated_tokens);
  IncrementToward(prefill_tokens_, g.prefill_tokens, last_generator_.prefill_tokens);
  IncrementToward(decode_steps_, g.decode_steps, last_generator_.decode_steps);
  batch_occupancy_.Set(g.slots > 0 ? static_cast<double>(g.running_sequences) / g.slots : 0);
  kv_cache_tokens_.Set(static_cast<double>(g.cached_tokens));
  kv_cache_capacity_.Set(static_cast<double>(g.cache_capacity_tokens));
  waiting_groups_.Set(static_cast<double>(g.waiting_groups));
  groups_in_flight_.Set(static_cast<double>(groups_in_flight));
  IncrementToward(decode_steps_by_mode_.Add({{"mode", "graph"}}), g.decoder.replays,
                  last_generator_.decoder.replays);
  IncrementToward(decode_steps_by_mode_.Add({{"mode", "eager"}}), g.decoder.eager_steps,
                  last_generator_.decoder.eager_steps);
  IncrementToward(decode_graph_captures_, g.decoder.captures, last_generator_.decoder.captures);
  decode_graphs_.Set(static_cast<double>(g.decoder.graphs));
  IncrementToward(samples_.Add({{"event", "submitted"}}), d.submitted, last_dispatcher_.submitted);
  IncrementToward(samples_.Add({{"event", "sent"}}), d.sent, last_dispatcher_.sent);
  IncrementToward(samples_.Add({{"event", "resent"}}), d.resent, last_dispatcher_.resent);
  IncrementToward(samples_.Add({{"event", "answered"}}), d.answered, last_dispatcher_.answered);
  IncrementToward(samples_.Add({{"event", "undeliverable"}}), d.undeliverable,
                  last_dispatcher_.undeliverable);
  IncrementToward(samples_.Add({{"event", "refused"}}), d.rejected, last_dispatcher_.rejected);
  samples_outstanding_.Set(static_cast<double>(d.queued + d.outstanding));
  last_generator_ = g;
  last_dispatcher_ = d;
}

}  // namespace kforge
