// DenseDecoder: the decode step of a Generator, whose running sequences sit
// in slots 0..n-1 of its KV cache (the generator keeps them there, see
// KvCache::Move). On a CUDA device it replays CUDA graphs of
// DecoderModel::DecodeDense; elsewhere, or with graphs turned off, it runs
// DecodeDense eagerly.
//
//   KF_ASSIGN_OR_RETURN(std::unique_ptr<DenseDecoder> decoder,
//                       DenseDecoder::Create(model, cache, {.cuda_graphs = true}));
//   // tokens[i] is appended to slot i at positions[i] (its length so far)
//   KF_ASSIGN_OR_RETURN(at::Tensor logits, decoder->Run(tokens, positions));  // [n, V]
//   cache->Advance(slots, 1);
//   // The next step, queued before the host has read the tokens drawn from
//   // `logits` (ids: int64 [n] on the device); rows = {0, 1, ..., n - 1}.
//   const DenseDecoder::DeviceTokens drawn{.ids = ids, .rows = rows};
//   KF_ASSIGN_OR_RETURN(logits, decoder->Run(placeholders, next_positions, &drawn));
//
// TOKENS FROM THE DEVICE. The generator queues step t + 1 before it waits
// for step t's sampled tokens to reach the host (generator.h), so a row's
// token may exist only on the device, in step t's sampled ids. Such rows
// take it there, after the inputs' host-to-device copy and outside any
// graph (the graph reads its input buffer): one device copy when the rows
// are that tensor's 0..n-1 in order (the steady state), else a gather whose
// row indices travel in the same single host-to-device copy as the inputs.
// (Eager steps copy their inputs from pageable memory, which waits for the
// stream: only graph replays overlap the host's work.)
//
// WHY GRAPHS. An eager decode step of a 28-layer model is ~1,100 kernel
// launches; on the GPU machines measured each costs 10-20 us whatever its
// size, while a kernel replayed from a graph costs ~1 us (bench/RESULTS.md).
//
// WHAT IS CAPTURED. One graph per (rows, span): rows = n rounded up to a
// batch bucket (powers of two to 8, then multiples of 16, at most the
// cache's slots), span = the longest position + 1 rounded up to
// `span_bucket` (at most max_len). Padding rows name free slots at position
// 0; what they write is never read (a slot's contents are forgotten when it
// is allocated). Inputs (ids, positions, device-token rows) travel in one
// pinned host-to-device copy into the graph's own input buffer; every graph
// writes its logits into one shared [slots, V] buffer, valid until the next
// Run, so graphs hold no output memory of their own; their scratch memory
// comes from one shared pool. The graphs hold the addresses of the weights
// and the cache: weights must be updated in place (copy_, as model/weights
// does), never replaced. Graphs are captured on first use (after one eager
// warm-up run, which writes keys and values at the positions the replay then
// overwrites) and, once a new one is captured, the least recently used are
// dropped past `max_graphs`. A failed capture turns
// graphs off for this decoder, with the reason in stats(), and the step runs
// eagerly.
//
// Threading: the generator's owner thread alone.
#ifndef KFORGE_MODEL_GENERATION_DENSE_DECODER_H_
#define KFORGE_MODEL_GENERATION_DENSE_DECODER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/generation/dense_decoder_options.h"

namespace kforge {

class DecoderModel;
class KvCache;

class DenseDecoder {
 public:
  // Rows whose token is on the device only: row i takes ids[rows[i]], or
  // the host's tokens[i] where rows[i] is -1.
  struct DeviceTokens {
    at::Tensor ids;                  // int64 [m] on the model's device
    absl::Span<const int64_t> rows;  // one per row of the step
  };

  // model and cache must outlive the decoder. INVALID_ARGUMENT for
  // non-positive bucket sizes.
  static absl::StatusOr<std::unique_ptr<DenseDecoder>> Create(const DecoderModel* model,
                                                              KvCache* cache,
                                                              const DenseDecoderOptions& options);
  ~DenseDecoder();
  DenseDecoder(const DenseDecoder&) = delete;
  DenseDecoder& operator=(const DenseDecoder&) = delete;

  // tokens[i] goes to slot i at positions[i]; the caller has checked the
  // slots (KvCache::CheckDecode). With `device`, the rows it names take
  // their token from device->ids instead (tokens[i] is then ignored).
  // Returns logits [n, V] on the model's device in the model's dtype (the
  // sampler reads bf16 logits as they are; a float32 copy of [64, 151936]
  // cost a decode step ~20 us on an H100). A graph replay only
  // queues device work; eager steps wait for the stream (see above).
  absl::StatusOr<at::Tensor> Run(absl::Span<const int64_t> tokens,
                                 absl::Span<const int64_t> positions,
                                 const DeviceTokens* device = nullptr);

  const DenseDecoderStats& stats() const { return stats_; }

  // The rows and span a step of n rows whose longest position is `longest`
  // replays (exposed for tests).
  std::pair<int64_t, int64_t> GraphShape(int64_t n, int64_t longest) const;

 private:
  struct Graph;
  DenseDecoder(const DecoderModel* model, KvCache* cache, const DenseDecoderOptions& options,
               bool use_graphs);

  // `longest`: the largest of positions; `device`: null when no row names it.
  absl::StatusOr<at::Tensor> RunEager(absl::Span<const int64_t> tokens,
                                      absl::Span<const int64_t> positions, int64_t longest,
                                      const DeviceTokens* device);
  absl::StatusOr<at::Tensor> RunGraph(absl::Span<const int64_t> tokens,
                                      absl::Span<const int64_t> positions, int64_t longest,
                                      const DeviceTokens* device);
  // Captures the graph of (rows, span) from the inputs staged for this step.
  absl::StatusOr<Graph*> Capture(int64_t rows, int64_t span);
  void EvictLeastRecentlyUsed();

  const DecoderModel* const model_;
  KvCache* const cache_;
  const DenseDecoderOptions options_;
  bool use_graphs_;
  at::Tensor staging_;  // pinned int64 [3 * slots]: ids, positions, device-token rows
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Graph>> graphs_;
  uint64_t clock_ = 0;  // for least-recently-used eviction
  DenseDecoderStats stats_;
  struct Pool;
  std::unique_ptr<Pool> pool_;  // the graphs' shared memory pool
};

}  // namespace kforge

#endif  // KFORGE_MODEL_GENERATION_DENSE_DECODER_H_
