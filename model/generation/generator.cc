#include "model/generation/generator.h"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#if KFORGE_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/generation/dense_decoder.h"
#include "model/sampling/token_sampler.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/unicode.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/kv_cache.h"
#include "model/transformer/torch_status.h"

namespace kforge {

// One sample being generated: its slot, parameters and what it produced.
struct Generator::Running {
  std::string group_id;
  int32_t index = 0;
  int64_t slot = -1;
  RowSamplingParams params;
  StopMatcher stop;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  absl::Duration queued;
  absl::Duration time_to_first_token;
  int32_t max_new_tokens = 0;  // at most what the slot holds
  // The row of in_flight_ that draws this sequence's pending token (one not
  // yet on the host), or -1.
  int64_t pending_row = -1;

  // Tokens drawn so far, the pending one included.
  size_t drawn() const { return tokens.size() + (pending_row >= 0 ? 1 : 0); }
};

namespace {

// A sampled batch on its way to the host: the copies are queued, not waited for.
struct QueuedDraws {
  at::Tensor device_ids;     // int64 [n] on the logits' device: the next step's inputs
  at::Tensor host_ids;       // int64 [n], pinned on CUDA
  at::Tensor host_logprobs;  // float32 [n], pinned on CUDA
#if KFORGE_WITH_CUDA
  at::cuda::CUDAEvent copied;  // recorded after both copies (never on the CPU)
#endif
};

// Host copies of a sampled batch.
struct HostDraws {
  std::vector<int64_t> tokens;
  std::vector<float> logprobs;
};

absl::StatusOr<QueuedDraws> QueueDraws(const TokenSampler& sampler, const at::Tensor& logits,
                                       absl::Span<const RowSamplingParams> params,
                                       absl::Span<const uint64_t> steps) {
  KF_ASSIGN_OR_RETURN(SampledTokens drawn, sampler.Sample(logits, params, steps));
  return TorchCall("copy sampled tokens to host", [&] {
    QueuedDraws draws;
    draws.device_ids = drawn.token_ids.to(at::kLong).contiguous();
    draws.host_ids = draws.device_ids;
    draws.host_logprobs = drawn.logprobs.to(at::kFloat).contiguous();
#if KFORGE_WITH_CUDA
    if (draws.device_ids.is_cuda()) {
      // Both copies queued into pinned memory and one event after them: the
      // host waits once, and only when it needs the tokens. They run on a
      // side stream once the sampler is done, so the decode stream goes on
      // to the next step without them and the idle time around them (~10 us
      // a step at batch 64 on an H100, bench/RESULTS.md).
      const c10::DeviceIndex device = draws.device_ids.device().index();
      const at::cuda::CUDAStream decode = at::cuda::getCurrentCUDAStream(device);
      const at::cuda::CUDAStream copies = at::cuda::getStreamFromPool(false, device);
      at::cuda::CUDAEvent sampled;
      sampled.record(decode);
      sampled.block(copies);
      // The device tokens and log-probs (host_logprobs holds the latter
      // until the move below) are not reused before the side stream has
      // read them; recorded before the copies are queued, so an exception
      // in between frees nothing a queued copy still reads.
      draws.device_ids.record_stream(copies);
      draws.host_logprobs.record_stream(copies);
      const at::TensorOptions pinned = at::TensorOptions().pinned_memory(true);
      at::Tensor lps = std::move(draws.host_logprobs);
      draws.host_ids = at::empty(draws.device_ids.sizes(), pinned.dtype(at::kLong));
      draws.host_logprobs = at::empty(lps.sizes(), pinned.dtype(at::kFloat));
      {
        const c10::cuda::CUDAStreamGuard on_copies(copies);
        draws.host_ids.copy_(draws.device_ids, /*non_blocking=*/true);
        draws.host_logprobs.copy_(lps, /*non_blocking=*/true);
        draws.copied.record(copies);
      }
    }
#endif
    return draws;
  });
}

// Blocks until `draws`' copies are done (on the CPU they are already).
absl::Status WaitCopied(const QueuedDraws& draws) {
#if KFORGE_WITH_CUDA
  return TorchCall("wait for sampled tokens", [&] {
    draws.copied.synchronize();
    return absl::OkStatus();
  });
#else
  (void)draws;
  return absl::OkStatus();
#endif
}

// Blocks until the work queued on the current stream of `on`'s device is done.
absl::Status WaitForStream(const at::Tensor& on) {
#if KFORGE_WITH_CUDA
  if (on.is_cuda()) {
    return TorchCall("wait for the decode stream", [&] {
      at::cuda::getCurrentCUDAStream(on.device().index()).synchronize();
      return absl::OkStatus();
    });
  }
#endif
  (void)on;
  return absl::OkStatus();
}

absl::StatusOr<HostDraws> WaitDraws(const QueuedDraws& draws) {
  KF_RETURN_IF_ERROR(WaitCopied(draws));
  const at::Tensor& ids = draws.host_ids;
  const at::Tensor& lps = draws.host_logprobs;
  HostDraws host;
  host.tokens.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  host.logprobs.assign(lps.data_ptr<float>(), lps.data_ptr<float>() + lps.numel());
  return host;
}

absl::Status CheckRequest(const GroupRequest& request, int64_t slots, int64_t max_len) {
  const std::string& id = request.group_id;
  if (request.samples.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("group ", id, ": no samples requested"));
  }
  if (static_cast<int64_t>(request.samples.size()) > slots) {
    return absl::InvalidArgumentError(absl::StrCat("group ", id, ": ", request.samples.size(),
                                                   " samples exceed the generator's ", slots,
                                                   " slots"));
  }
  if (request.prompt_tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("group ", id, ": empty prompt"));
  }
  if (static_cast<int64_t>(request.prompt_tokens.size()) >= max_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ", id, ": prompt of ", request.prompt_tokens.size(),
                     " tokens leaves no room in slots of ", max_len, " tokens"));
  }
  for (size_t i = 0; i < request.samples.size(); ++i) {
    KF_RETURN_IF_ERROR(ValidateSamplingParams(
        request.samples[i], absl::StrCat("group ", id, " samples[", i, "]")));
  }
  return StopMatcher::Create(request.stop).status();
}

}  // namespace

// A decode step queued on the device whose tokens the host has not taken in.
struct Generator::InFlight {
  // Row i's sequence; null once it finished (by EOS or a stop string found
  // after this step was queued): that row's draw is discarded.
  std::vector<Running*> rows;
  QueuedDraws draws;
};

absl::StatusOr<std::unique_ptr<Generator>> Generator::Create(const DecoderModel* model,
                                                             const BpeTokenizer* tokenizer,
                                                             const GeneratorOptions& options) {
  if (model == nullptr || tokenizer == nullptr) {
    return absl::InvalidArgumentError("generator: model and tokenizer are required");
  }
  if (options.slots <= 0 || options.max_len <= 1) {
    return absl::InvalidArgumentError(absl::StrCat("generator: slots (", options.slots,
                                                   ") must be >= 1 and max_len (",
                                                   options.max_len, ") >= 2"));
  }
  KF_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                      model->NewKvCache(options.slots, options.max_len));
  KF_ASSIGN_OR_RETURN(std::unique_ptr<DenseDecoder> decoder,
                      DenseDecoder::Create(model, cache.get(), options.decode));
  return std::unique_ptr<Generator>(
      new Generator(model, tokenizer, std::move(cache), std::move(decoder)));
}

Generator::Generator(const DecoderModel* model, const BpeTokenizer* tokenizer,
                     std::unique_ptr<KvCache> cache, std::unique_ptr<DenseDecoder> decoder)
    : model_(model),
      tokenizer_(tokenizer),
      cache_(std::move(cache)),
      decoder_(std::move(decoder)),
      sampler_(std::make_unique<TokenSampler>()) {
  counters_.slots = cache_->shape().slots;
  counters_.cache_capacity_tokens = cache_->shape().slots * cache_->shape().max_len;
  PublishStats();
}

Generator::~Generator() {
  // The step in flight writes into the cache and the pinned buffers.
  (void)DropInFlight();
}

absl::Status Generator::Enqueue(GroupRequest request) {
  KF_RETURN_IF_ERROR(CheckRequest(request, cache_->shape().slots, cache_->shape().max_len));
  // The slot holds the prompt and at most max_len - prompt completion tokens.
  const int32_t room =
      static_cast<int32_t>(cache_->shape().max_len - request.prompt_tokens.size());
  if (request.stop.max_new_tokens == 0 || request.stop.max_new_tokens > room) {
    request.stop.max_new_tokens = room;
  }
  waiting_.push_back({std::move(request), absl::Now()});
  PublishStats();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<GeneratedSample>> Generator::Step() {
  // Samples finished by a step that then failed are handed over now.
  std::vector<GeneratedSample> finished = std::move(carried_);
  carried_.clear();
  absl::Status status = device_fault_;
  while (status.ok() && !waiting_.empty() &&
         static_cast<size_t>(cache_->free_slots()) >= waiting_.front().request.samples.size()) {
    // On failure the group stays at the front of the queue, untouched.
    status = Admit(waiting_.front(), &finished);
    if (status.ok()) waiting_.pop_front();
  }
  if (status.ok() && (!running_.empty() || in_flight_ != nullptr)) {
    status = DecodeRunning(&finished);
  }
  PublishStats();
  if (!status.ok()) {
    carried_ = std::move(finished);
    return status;
  }
  return finished;
}

absl::Status Generator::Admit(const Waiting& waiting, std::vector<GeneratedSample>* finished) {
  const GroupRequest& request = waiting.request;
  const absl::Time admitted = absl::Now();
  KF_ASSIGN_OR_RETURN(const int64_t prompt_slot, cache_->Allocate());
  const std::vector<int64_t> prompt(request.prompt_tokens.begin(), request.prompt_tokens.end());
  absl::StatusOr<at::Tensor> logits = model_->Prefill(cache_.get(), prompt_slot, prompt);
  const int64_t group_size = static_cast<int64_t>(request.samples.size());
  absl::StatusOr<std::vector<int64_t>> slots =
      logits.ok() ? cache_->Fork(prompt_slot, group_size - 1) : logits.status();
  if (!slots.ok()) {
    (void)cache_->Free(prompt_slot);
    return slots.status();
  }
  slots->insert(slots->begin(), prompt_slot);
  counters_.prefill_tokens += prompt.size();

  const std::vector<uint64_t> steps(static_cast<size_t>(group_size), 0);
  // Drawn at once: the first tokens are the first decode step's inputs.
  absl::StatusOr<HostDraws> draws = TorchCall("first tokens", [&]() -> absl::StatusOr<HostDraws> {
    KF_ASSIGN_OR_RETURN(QueuedDraws queued,
                        QueueDraws(*sampler_, logits->unsqueeze(0).expand({group_size, -1}),
                                   request.samples, steps));
    return WaitDraws(queued);
  });
  if (!draws.ok()) {
    for (int64_t slot : *slots) (void)cache_->Free(slot);
    return draws.status();
  }
  const absl::Time first_token = absl::Now();
  for (int64_t i = 0; i < group_size; ++i) {
    auto seq = std::make_unique<Running>(Running{
        .group_id = request.group_id,
        .index = static_cast<int32_t>(i),
        .slot = (*slots)[static_cast<size_t>(i)],
        .params = request.samples[static_cast<size_t>(i)],
        .stop = *StopMatcher::Create(request.stop),  // checked at Enqueue
        .queued = admitted - waiting.enqueued,
        .time_to_first_token = first_token - waiting.enqueued,
        .max_new_tokens = request.stop.max_new_tokens,  // capped by Enqueue
    });
    const bool done = Accept(*seq, static_cast<int32_t>(draws->tokens[static_cast<size_t>(i)]),
                             draws->logprobs[static_cast<size_t>(i)]);
    running_.push_back(std::move(seq));
    if (done) Finish(running_.back().get(), finished);
  }
  return absl::OkStatus();
}

absl::Status Generator::CompactSlots() {
  const auto by_slot = [](const auto& a, const auto& b) { return a->slot < b->slot; };
  std::sort(running_.begin(), running_.end(), by_slot);
  const int64_t n = std::count_if(running_.begin(), running_.end(),
                                  [](const auto& seq) { return seq->slot >= 0; });
  // Slots below n that no sequence holds, lowest first; the sequences above
  // n, highest first, move into them.
  std::vector<int64_t> holes;
  for (int64_t slot = 0; slot < n; ++slot) {
    if (cache_->length(slot) < 0) holes.push_back(slot);
  }
  size_t mover = running_.size();
  for (int64_t hole : holes) {
    Running& seq = *running_[--mover];
    KF_RETURN_IF_ERROR(cache_->Move(seq.slot, hole));
    seq.slot = hole;
    ++counters_.slot_moves;
  }
  if (!holes.empty()) std::sort(running_.begin(), running_.end(), by_slot);
  return absl::OkStatus();
}

absl::Status Generator::DecodeRunning(std::vector<GeneratedSample>* finished) {
  // The next step is queued before the host waits for the one in flight, so
  // the device computes while the host takes in that step's tokens.
  std::unique_ptr<InFlight> previous = std::move(in_flight_);
  if (absl::Status launched = Launch(previous.get()); !launched.ok()) {
    in_flight_ = std::move(previous);  // still in flight, still to be taken in
    return launched;
  }
  if (previous != nullptr) {
    if (absl::Status accepted = AcceptDraws(*previous, finished); !accepted.ok()) {
      // Its tokens are lost, and the step just queued took them as inputs.
      device_fault_ = accepted;
      return accepted;
    }
  }
  // Every sequence left is in the step in flight; with none left, nothing
  // stays in flight.
  return running_.empty() ? DropInFlight() : absl::OkStatus();
}

absl::Status Generator::Launch(const InFlight* previous) {
  // A sequence whose pending token is its last needs its slot no more: freed
  // now, the steps keep reading slots 0..n-1 (the step in flight, which
  // reads it, is ahead on the stream of whatever reuses it).
  for (const std::unique_ptr<Running>& seq : running_) {
    if (seq->slot >= 0 && seq->drawn() >= static_cast<size_t>(seq->max_new_tokens)) {
      (void)cache_->Free(seq->slot);  // allocated: cannot fail
      seq->slot = -1;
    }
  }
  KF_RETURN_IF_ERROR(CompactSlots());
  auto step = std::make_unique<InFlight>();
  std::vector<int64_t> slots, tokens, sources, positions;
  std::vector<RowSamplingParams> params;
  std::vector<uint64_t> steps;
  for (const std::unique_ptr<Running>& seq : running_) {
    if (seq->slot < 0) continue;
    // The dense step reads row i from slot i.
    if (seq->slot != static_cast<int64_t>(slots.size())) {
      return absl::InternalError(absl::StrCat("generator: sequence ", slots.size(),
                                              " of the decode batch sits in slot ", seq->slot));
    }
    slots.push_back(seq->slot);
    // A pending token is taken on the device, from the step in flight.
    tokens.push_back(seq->pending_row >= 0 ? 0 : seq->tokens.back());
    sources.push_back(seq->pending_row);
    positions.push_back(cache_->length(seq->slot));
    params.push_back(seq->params);
    steps.push_back(seq->drawn());  // the draw's index, as without lookahead
    step->rows.push_back(seq.get());
  }
  if (!step->rows.empty()) {
    KF_RETURN_IF_ERROR(model_->CheckTokens(tokens));
    KF_RETURN_IF_ERROR(cache_->CheckDecode(slots).status());
    const DenseDecoder::DeviceTokens pending{
        .ids = previous != nullptr ? previous->draws.device_ids : at::Tensor(), .rows = sources};
    KF_ASSIGN_OR_RETURN(at::Tensor logits, decoder_->Run(tokens, positions, &pending));
    absl::StatusOr<QueuedDraws> queued = QueueDraws(*sampler_, logits, params, steps);
    if (!queued.ok()) {
      // The replay is queued but no step records it: let the device finish
      // it before the error leaves, so none of its work outlives the call.
      (void)WaitForStream(logits);
      return queued.status();
    }
    step->draws = *std::move(queued);
    cache_->Advance(slots, 1);
    ++counters_.decode_steps;
  }
  // Sequences left out have their pending token in `previous`, taken in next.
  for (const std::unique_ptr<Running>& seq : running_) seq->pending_row = -1;
  for (size_t row = 0; row < step->rows.size(); ++row) {
    step->rows[row]->pending_row = static_cast<int64_t>(row);
  }
  in_flight_ = step->rows.empty() ? nullptr : std::move(step);
  return absl::OkStatus();
}

absl::Status Generator::AcceptDraws(InFlight& step, std::vector<GeneratedSample>* finished) {
  KF_ASSIGN_OR_RETURN(const HostDraws draws, WaitDraws(step.draws));
  for (size_t row = 0; row < step.rows.size(); ++row) {
    Running* seq = step.rows[row];
    if (seq == nullptr) continue;  // finished after this step was queued
    if (Accept(*seq, static_cast<int32_t>(draws.tokens[row]), draws.logprobs[row])) {
      Finish(seq, finished);
    }
  }
  return absl::OkStatus();
}

absl::Status Generator::DropInFlight() {
  absl::Status waited = WaitForDevice();
  in_flight_.reset();
  return waited;
}

absl::Status Generator::WaitForDevice() {
  return in_flight_ == nullptr ? absl::OkStatus() : WaitCopied(in_flight_->draws);
}

bool Generator::Accept(Running& seq, int32_t token, float logprob) {
  seq.tokens.push_back(token);
  seq.logprobs.push_back(logprob);
  ++counters_.generated_tokens;
  return seq.stop.Append(token, tokenizer_->RawBytes(token)) != FinishReason::kNone;
}

void Generator::Finish(const Running* done, std::vector<GeneratedSample>* finished) {
  const auto it = std::find_if(running_.begin(), running_.end(),
                               [done](const auto& seq) { return seq.get() == done; });
  std::unique_ptr<Running> seq = std::move(*it);
  *it = std::move(running_.back());
  running_.pop_back();
  // The step in flight may have drawn for it: that draw is never read.
  if (seq->pending_row >= 0) in_flight_->rows[static_cast<size_t>(seq->pending_row)] = nullptr;
  if (seq->slot >= 0) (void)cache_->Free(seq->slot);  // allocated: cannot fail
  ++counters_.finished_samples;
  finished->push_back(GeneratedSample{
      .group_id = std::move(seq->group_id),
      .index = seq->index,
      .tokens = std::move(seq->tokens),
      .logprobs = std::move(seq->logprobs),
      // Byte-level pieces can end inside a character: as Hugging Face
      // decodes, ill-formed bytes become U+FFFD (proto strings are UTF-8).
      .text = tokenizer::Utf8Lossy(seq->stop.text()),
      .finish_reason = seq->stop.finish_reason(),
      .queued = seq->queued,
      .time_to_first_token = seq->time_to_first_token,
  });
}

std::vector<std::string> Generator::Abandon() {
  std::vector<std::string> dropped;
  absl::flat_hash_set<std::string> seen;
  for (const GeneratedSample& sample : carried_) {
    if (seen.insert(sample.group_id).second) dropped.push_back(sample.group_id);
  }
  carried_.clear();
  // Already the error path: a device error while waiting changes nothing.
  (void)DropInFlight();
  device_fault_ = absl::OkStatus();
  for (const std::unique_ptr<Running>& seq : running_) {
    if (seq->slot >= 0) (void)cache_->Free(seq->slot);
    if (seen.insert(seq->group_id).second) dropped.push_back(seq->group_id);
  }
  for (const Waiting& w : waiting_) {
    if (seen.insert(w.request.group_id).second) dropped.push_back(w.request.group_id);
  }
  running_.clear();
  waiting_.clear();
  PublishStats();
  return dropped;
}

void Generator::PublishStats() {
  counters_.waiting_groups = static_cast<int64_t>(waiting_.size());
  counters_.running_sequences = static_cast<int64_t>(running_.size());
  int64_t cached = 0;
  for (int64_t slot = 0; slot < cache_->shape().slots; ++slot) {
    cached += std::max<int64_t>(cache_->length(slot), 0);
  }
  counters_.cached_tokens = cached;
  counters_.decoder = decoder_->stats();
  absl::MutexLock lock(&stats_mu_);
  published_ = counters_;
}

GeneratorStats Generator::stats() const {
  absl::MutexLock lock(&stats_mu_);
  return published_;
}

}  // namespace kforge
