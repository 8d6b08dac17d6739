// Generator: continuous-batching generation of sample groups over one
// DecoderModel and one KV cache. The rollout worker's sampling engine, and
// what `kforge eval` samples with.
//
//   KF_ASSIGN_OR_RETURN(std::unique_ptr<Generator> gen,
//                       Generator::Create(model, tokenizer, {.slots = 64, .max_len = 4096}));
//   KF_RETURN_IF_ERROR(gen->Enqueue({.group_id = "g1", .prompt_tokens = ids,
//                                    .samples = per_sample_params, .stop = stop}));
//   while (!gen->idle()) {
//     KF_ASSIGN_OR_RETURN(std::vector<GeneratedSample> done, gen->Step());
//     for (GeneratedSample& s : done) Ship(std::move(s));   // at once, not per group
//     if (new_weights) { KF_RETURN_IF_ERROR(gen->WaitForDevice()); Apply(); }
//   }
//
// HOW A STEP RUNS.
//  1. Admission, in arrival order: a waiting group is admitted when the cache
//     has a free slot for each of its G samples (a group is never split, so
//     its samples share one policy version and one prompt cache). Its prompt
//     is prefilled once into one slot and the cache forked into G - 1 more;
//     the first token of every sample is drawn from that one set of logits.
//     A group that does not fit waits (head-of-line: later groups do not
//     overtake it, so a large group is not starved).
//  2. One batched decode step over every running sequence that needs
//     another token, each at its own length, is *queued* on the device; the
//     tokens are drawn with TokenSampler (see token_sampler.h for exactly
//     which distribution the log-probabilities are under) and copied into
//     pinned host memory, with an event after the copies. Running sequences
//     are kept in slots 0..n-1 (a finished sequence's slot is filled by
//     moving the highest one down, one copy each), so the step reads one
//     contiguous range of the cache and, on a GPU, is replayed from a CUDA
//     graph (dense_decoder.h).
//  3. Only then does the host wait for the tokens of the step the previous
//     Step() call queued, and append them. Sequences that finished (EOS, a
//     stop string, max_new_tokens, or a full cache slot) are returned and
//     their slots freed at once, so the next call admits waiting groups into
//     them: the batch stays full.
//
// ONE STEP OF LOOKAHEAD. The GPU timeline is graph t, sample t, copy t,
// then graph t + 1, queued before the host waits for copy t: while the host
// reads step t's tokens, matches stop strings and stages step t + 1's
// inputs, the GPU is already computing. So a running sequence may have one
// *pending* token, drawn by the step in flight and not yet on the host;
// step t + 1 takes it as input on the device, from step t's sampled ids
// (dense_decoder.h). Consequences:
//   - Step() returns a token one call after the call that queued its step.
//   - A sequence whose pending token is its max_new_tokens-th is left out
//     of the next step, and its slot is freed at once: that slot's cache is
//     never read again.
//   - A sequence ended by EOS or a stop string is found out only when its
//     pending token reaches the host, after the next step was queued with
//     it: that row's draw is discarded.
//   - Slot moves, frees and admissions are ordered after the step in
//     flight by the device stream, so the step reads what it was queued
//     with.
// When no sequence is left running, nothing is left in flight. None of this
// changes a sample's tokens: each draw keeps its own step index.
//
// REPRODUCIBILITY. A sample's tokens depend only on the weights, its prompt,
// its RowSamplingParams (seed included) and the device: never on which other
// sequences share its batch or when it was admitted (TokenSampler draws with
// SamplingUniform(seed, step)). Greedy (temperature 0) gives the argmax chain.
//
// LIMITS. max_new_tokens is capped at what the slot can hold after the
// prompt (max_len - prompt length); such a sample finishes with kMaxTokens.
// A prompt that leaves no room, a group larger than the cache, an empty
// prompt or invalid parameters are INVALID_ARGUMENT at Enqueue, naming the
// group: nothing is queued and the generator carries on.
//
// WEIGHT UPDATES. Between two Step() calls a decode step may still be
// running on the device and reading the weights: call WaitForDevice() before
// writing them (in place, dense_decoder.h), on whatever stream. The tokens of
// that step were drawn under the old weights, though the next Step()
// returns them; every step queued afterwards (and every prefill) reads the
// new ones.
//
// Threading: one owner thread calls Enqueue, Step and WaitForDevice (weights
// may be updated by that thread between steps); stats() may be read from
// any thread.
#ifndef KFORGE_MODEL_GENERATION_GENERATOR_H_
#define KFORGE_MODEL_GENERATION_GENERATOR_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "model/generation/dense_decoder_options.h"
#include "model/sampling/sampling_params.h"
#include "model/sampling/stop_matcher.h"

namespace kforge {

class BpeTokenizer;
class DecoderModel;
class DenseDecoder;
class KvCache;
class TokenSampler;

struct GeneratorOptions {
  // Sequences held at once: the KV cache's slots and the largest decode batch.
  int64_t slots = 0;
  // Tokens per slot, prompt and completion together.
  int64_t max_len = 0;
  // How decode steps run (CUDA graphs on a GPU).
  DenseDecoderOptions decode;
};

// One prompt and the G samples to draw from it.
struct GroupRequest {
  std::string group_id;
  std::vector<int32_t> prompt_tokens;
  // One entry per sample (G = samples.size()), each with its own seed.
  std::vector<RowSamplingParams> samples;
  StopConditions stop;
};

struct GeneratedSample {
  std::string group_id;
  int32_t index = 0;                // within the group, 0..G-1
  std::vector<int32_t> tokens;      // every sampled token, EOS included
  std::vector<float> logprobs;      // one per token: log q(token), see token_sampler.h
  std::string text;                 // completion text, cut at a stop string; valid UTF-8
  FinishReason finish_reason = FinishReason::kNone;
  absl::Duration queued;            // from Enqueue to admission
  absl::Duration time_to_first_token;  // from Enqueue to the first token
};

struct GeneratorStats {
  int64_t waiting_groups = 0;
  int64_t running_sequences = 0;
  int64_t slots = 0;
  int64_t cached_tokens = 0;        // tokens held in the KV cache now
  int64_t cache_capacity_tokens = 0;
  uint64_t generated_tokens = 0;    // since creation
  uint64_t prefill_tokens = 0;      // since creation
  uint64_t decode_steps = 0;
  uint64_t finished_samples = 0;
  uint64_t slot_moves = 0;          // sequences moved down to keep slots dense
  DenseDecoderStats decoder;
};

class Generator {
 public:
  // model and tokenizer must outlive the generator. INVALID_ARGUMENT for
  // non-positive sizes; RESOURCE_EXHAUSTED when the cache does not fit.
  static absl::StatusOr<std::unique_ptr<Generator>> Create(const DecoderModel* model,
                                                           const BpeTokenizer* tokenizer,
                                                           const GeneratorOptions& options);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  absl::Status Enqueue(GroupRequest request);

  // Admits what fits, queues one decode step, takes in the tokens of the
  // step queued by the previous call, returns what finished. An error from
  // the model (for example out of device memory) is returned with the
  // waiting and running work left in place (a group whose admission failed
  // stays first in the queue, the step in flight stays in flight) and the
  // samples that call had finished kept for the next successful Step;
  // Abandon() reports and clears all of it. An error while waiting for a
  // step's tokens (a device fault) loses them: Step returns it again until
  // Abandon().
  absl::StatusOr<std::vector<GeneratedSample>> Step();

  // Blocks until the decode step in flight, if any, is done on the device
  // (its tokens are taken in by the next Step, as always). For weight
  // updates: see WEIGHT UPDATES above.
  absl::Status WaitForDevice();

  // Drops every waiting and running group, waits for the step in flight and
  // frees the cache; returns the ids of the groups dropped (each once), for
  // the caller to report.
  std::vector<std::string> Abandon();

  bool idle() const { return waiting_.empty() && running_.empty() && carried_.empty(); }
  GeneratorStats stats() const;

 private:
  struct Waiting {
    GroupRequest request;
    absl::Time enqueued;
  };
  struct Running;
  struct InFlight;

  Generator(const DecoderModel* model, const BpeTokenizer* tokenizer,
            std::unique_ptr<KvCache> cache, std::unique_ptr<DenseDecoder> decoder);
  // Prefills one group into fresh slots and draws its first tokens.
  absl::Status Admit(const Waiting& waiting, std::vector<GeneratedSample>* finished);
  // Queues the next decode step, then takes in the one in flight.
  absl::Status DecodeRunning(std::vector<GeneratedSample>* finished);
  // Queues a step over the sequences that need another token, taking
  // pending tokens from `previous`; on success in_flight_ is that step (null
  // when no sequence needs one) and every pending_row names a row of it.
  absl::Status Launch(const InFlight* previous);
  // Waits for `step`'s tokens and appends them to the sequences still there.
  absl::Status AcceptDraws(InFlight& step, std::vector<GeneratedSample>* finished);
  // Waits for the step in flight, if any, and forgets it.
  absl::Status DropInFlight();
  // Moves the highest sequences holding slots into free slots below n, so
  // those n hold slots 0..n-1; leaves running_ in slot order (slotless
  // first).
  absl::Status CompactSlots();
  // Appends one sampled token to a running sequence; true when it finished.
  bool Accept(Running& seq, int32_t token, float logprob);
  void Finish(const Running* seq, std::vector<GeneratedSample>* finished);
  void PublishStats();

  const DecoderModel* const model_;
  const BpeTokenizer* const tokenizer_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<DenseDecoder> decoder_;  // reads cache_
  std::unique_ptr<TokenSampler> sampler_;
  std::deque<Waiting> waiting_;
  std::vector<std::unique_ptr<Running>> running_;
  std::unique_ptr<InFlight> in_flight_;   // the step queued by the last Step()
  absl::Status device_fault_;             // not OK once a step's tokens were lost
  std::vector<GeneratedSample> carried_;  // finished by a step that then failed
  GeneratorStats counters_;  // owner thread's copy

  mutable absl::Mutex stats_mu_;
  GeneratorStats published_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace kforge

#endif  // KFORGE_MODEL_GENERATION_GENERATOR_H_
