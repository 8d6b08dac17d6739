// RolloutEngine: the rollout worker's sampling loop. Turns the learner's
// WorkItems (a prompt and a group size) into finished Samples, one at a time
// as each completes, on its own thread over a Generator.
//
//   KF_ASSIGN_OR_RETURN(auto engine, RolloutEngine::Create(
//       model.get(), tokenizer.get(), {.worker_id = id, .slots = 64, .max_len = 4096},
//       [&](v1::Sample s, const v1::WorkItem& item, absl::Duration ttft) { ... }, on_dropped));
//   KF_RETURN_IF_ERROR(engine->Submit(std::move(item)));
//   engine->RunBetweenSteps([&] { ApplyNewWeights(); engine_version = 7; });
//
// A sample's id is "<job_id>/<group_id>/<index>" (a follow-up turn's, an
// item with turn > 0 and one sequence: "<job_id>/<group_id>/<trajectory
// index>/t<turn>", see rollout_worker/turns/turn_loop.h); its seed is derived from
// the job's base seed and that id (sampling_params.h), so a re-issued group
// sampled under the same weights reproduces its completions. The prompt is
// the item's prompt_tokens, or its prompt_text encoded with the model's
// tokenizer (chat markers become their special tokens). EOS is the model
// config's eos_token_id, or the tokenizer's <|im_end|> and <|endoftext|>
// when the config names none. Every sample records the policy version the
// engine held when its group entered the generator; weights change only between
// decode steps, through RunBetweenSteps (which first waits for the decode step
// the generator keeps in flight: its tokens, returned by the next step, were
// drawn under the old weights), and a group admitted under one version
// finishes under the weights applied since (the learner bounds that staleness
// by version).
//
// Threads: Submit, RunBetweenSteps and the accessors from any thread; the
// "kf-sampler" thread runs the generator, the closures and on_sample. A
// generator failure (for example out of device memory) abandons the running
// groups, reports them through on_dropped, and carries on.
#ifndef KFORGE_ROLLOUT_WORKER_SAMPLER_ROLLOUT_ENGINE_H_
#define KFORGE_ROLLOUT_WORKER_SAMPLER_ROLLOUT_ENGINE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/metrics/state_clock.h"
#include "kforge/v1/learner_service.pb.h"
#include "kforge/v1/sample.pb.h"
#include "model/generation/generator.h"

namespace kforge {

class BpeTokenizer;
class DecoderModel;

class RolloutEngine {
 public:
  struct Options {
    std::string worker_id;
    int64_t slots = 16;     // sequences decoded at once
    int64_t max_len = 4096;  // prompt + completion tokens per sequence
    DenseDecoderOptions decode;  // CUDA graphs on a GPU
  };
  // The sample, the work item it came from, and its time to first token.
  using SampleCallback =
      std::function<void(v1::Sample, const v1::WorkItem&, absl::Duration time_to_first_token)>;
  using DroppedCallback = std::function<void(const v1::WorkItem&, const absl::Status&)>;

  static absl::StatusOr<std::unique_ptr<RolloutEngine>> Create(const DecoderModel* model,
                                                               const BpeTokenizer* tokenizer,
                                                               Options options,
                                                               SampleCallback on_sample,
                                                               DroppedCallback on_dropped);
  ~RolloutEngine();  // stops the thread; queued and running groups are dropped
  RolloutEngine(const RolloutEngine&) = delete;
  RolloutEngine& operator=(const RolloutEngine&) = delete;

  // Checks the item (ids, group size, sampling parameters, prompt) and
  // queues it; INVALID_ARGUMENT names the field. Never blocks.
  absl::Status Submit(v1::WorkItem item);
  // Runs `fn` on the sampler thread before the next decode step.
  void RunBetweenSteps(std::function<void()> fn);
  // The same, and waits until `fn` has run: false when `stop` was notified
  // first. `fn` may then still run later, so it must own what it uses.
  bool RunBetweenStepsAndWait(std::function<void()> fn, const absl::Notification& stop);
  // Only from the sampler thread (inside RunBetweenSteps): the version new
  // groups are stamped with.
  void set_policy_version(int64_t version) {
    policy_version_ = version;
    unusable_weights_ = absl::OkStatus();
  }
  // Only from the sampler thread (inside RunBetweenSteps): drops every
  // running and queued group through on_dropped, for when the weights can
  // no longer be trusted (a failed broadcast receive that could not be
  // repaired), and every group submitted later too, until new weights are
  // applied (set_policy_version).
  void DropAll(const absl::Status& why);

  int64_t groups_in_flight() const;
  GeneratorStats generator_stats() const { return generator_->stats(); }

  // The sampler thread's wall time since creation, by what it did:
  // generating (admitting, prefilling, decode steps), between steps
  // (RunBetweenSteps closures: applying new weights) and idle (nothing to
  // decode: waiting for work, or for weights before work can start).
  struct SamplerTimes {
    absl::Duration generating;
    absl::Duration between_steps;
    absl::Duration idle;
  };
  SamplerTimes sampler_times() const;

 private:
  enum SamplerState { kGenerating = 0, kBetweenSteps = 1, kIdle = 2, kSamplerStates = 3 };
  struct Group {
    v1::WorkItem item;
    int64_t policy_version = 0;
    int32_t remaining = 0;
    std::vector<int32_t> prompt_tokens;  // as encoded for the generator
    absl::Time enqueued;  // when the generator took the group
  };

  RolloutEngine(const BpeTokenizer* tokenizer, Options options, std::unique_ptr<Generator> gen,
                absl::flat_hash_set<int32_t> eos, SampleCallback on_sample,
                DroppedCallback on_dropped);
  absl::StatusOr<GroupRequest> ToRequest(const v1::WorkItem& item) const;
  void Loop();
  void Emit(GeneratedSample generated);
  // Abandons the generator's groups, reporting each through on_dropped.
  void DropRunning(const absl::Status& why);

  const BpeTokenizer* const tokenizer_;
  const Options options_;
  const std::unique_ptr<Generator> generator_;
  const absl::flat_hash_set<int32_t> eos_;
  const SampleCallback on_sample_;
  const DroppedCallback on_dropped_;
  int64_t policy_version_ = 0;  // sampler thread
  absl::Status unusable_weights_;  // sampler thread; not OK after DropAll
  int64_t vocab_size_ = 0;
  StateClock sampler_clock_{kSamplerStates, kIdle, absl::Now()};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<v1::WorkItem> inbox_ ABSL_GUARDED_BY(mu_);
  std::deque<std::function<void()>> between_steps_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Group> groups_ ABSL_GUARDED_BY(mu_);  // by group_id
  std::thread thread_;
};

}  // namespace kforge

#endif  // KFORGE_ROLLOUT_WORKER_SAMPLER_ROLLOUT_ENGINE_H_
