// Keys and values of the decoder for a fixed number of sequences ("slots"),
// preallocated as one tensor [layers, 2 (keys, values), slots, kv_heads,
// max_len, head_dim] on the model's device and dtype, with each slot's length
// kept on the host. One tensor, so forking or moving a slot is one copy
// whatever the number of layers.
//
//   std::unique_ptr<KvCache> cache = *model->NewKvCache(/*slots=*/64, /*max_len=*/4096);
//   int64_t prompt_slot = *cache->Allocate();
//   at::Tensor last = *model->Prefill(*cache, prompt_slot, prompt_tokens);   // [V]
//   std::vector<int64_t> group = *cache->Fork(prompt_slot, 7);  // 7 more copies of the prompt
//   group.push_back(prompt_slot);
//   at::Tensor next = *model->DecodeStep(*cache, group, sampled);  // [8, V]
//   for (int64_t slot : group) cache->Free(slot);
//
// Slots advance independently: a decode step may name any subset of the
// allocated slots, each at its own length. Forking copies the prefix (the
// group's prompt) into the new slots; the prompt is computed once. Allocate
// and Fork take the lowest free slots and Move relocates a slot, so an owner
// can keep its sequences in slots 0..n-1: a dense decode step
// (DenseDecodeBatch) then reads the cache as one contiguous range, with no
// host work, which is what a CUDA graph replays.
//
// Not thread-safe: one thread (the sampler loop) owns a cache.
#ifndef KFORGE_MODEL_TRANSFORMER_KV_CACHE_H_
#define KFORGE_MODEL_TRANSFORMER_KV_CACHE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kforge {

struct KvCacheShape {
  int64_t layers = 0;
  int64_t slots = 0;
  int64_t kv_heads = 0;
  int64_t max_len = 0;  // tokens per slot, prompt and generation together
  int64_t head_dim = 0;
};

class KvCache {
 public:
  // INVALID_ARGUMENT for non-positive sizes; RESOURCE_EXHAUSTED when the
  // device cannot hold layers * 2 * slots * kv_heads * max_len * head_dim.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(const KvCacheShape& shape,
                                                         const at::TensorOptions& options);

  // A free slot, empty. RESOURCE_EXHAUSTED when all are in use.
  absl::StatusOr<int64_t> Allocate();
  // Returns the slot to the pool; its contents are forgotten.
  absl::Status Free(int64_t slot);
  // Allocates `count` slots holding copies of `source`'s tokens so far.
  // Nothing is allocated when fewer than `count` are free.
  absl::StatusOr<std::vector<int64_t>> Fork(int64_t source, int64_t count);
  // Moves allocated slot `from` (its tokens so far) into free slot `to`;
  // `from` is freed.
  absl::Status Move(int64_t from, int64_t to);

  // Tokens stored in `slot` (its next position). -1 for a slot not allocated.
  int64_t length(int64_t slot) const;
  int64_t free_slots() const;
  const KvCacheShape& shape() const { return shape_; }

  // For DecoderModel ---------------------------------------------------------
  // OK when `slot` is allocated and `added` more tokens fit.
  absl::Status CheckAppend(int64_t slot, int64_t added) const;
  // Stores k, v [1, KVH, T, D] of `slot` at positions length..length+T-1 and
  // attends q [1, H, T, D] over the slot's tokens 0..length+T-1 (causally).
  at::Tensor AttendPrefill(int64_t layer, int64_t slot, const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v);

  // One token for each of a list of distinct allocated slots, each at its own
  // length. Built once per step, shared by the layers.
  struct DecodeBatch {
    at::Tensor slots;      // int64 [N] on the device
    at::Tensor positions;  // int64 [N]: each slot's length
    at::Tensor mask;       // additive, the cache's dtype [N, 1, 1, span]: 0 or -inf;
                           // undefined when built without (kforge's attention reads none)
    int64_t span = 0;      // longest length + 1: the key positions read
    int64_t first = -1;    // >= 0 when the slots are first..first+N-1 in order
  };
  absl::StatusOr<DecodeBatch> MakeDecodeBatch(absl::Span<const int64_t> slots,
                                              bool with_mask = true) const;
  // Host-side checks of a decode step over `slots` (distinct, allocated, room
  // for one more token each); returns the longest length among them.
  absl::StatusOr<int64_t> CheckDecode(absl::Span<const int64_t> slots) const;
  // Rows 0..N-1 are slots 0..N-1 at positions [N] (int64, on the device),
  // keys 0..span-1 read. Device ops only, no host synchronisation: safe to
  // capture in a CUDA graph. Rows of free slots may be included as padding
  // (position 0): they write into a slot whose contents are forgotten.
  DecodeBatch DenseDecodeBatch(const at::Tensor& positions, int64_t span,
                               bool with_mask = true) const;
  // Stores k, v [N, KVH, 1, D] at each slot's position; attends q [N, H, 1, D].
  // With rope_inv_freq (float32 [D / 2], on a CUDA cache with kforge's
  // kernels) q and k come unrotated and one kernel rotates them and stores
  // k and v (FusedRopeStore). With kforge_attention, where
  // FusedDecodeAttention takes the shapes, it attends (reading each row's
  // keys 0..position from its slot, no mask), and with rope_inv_freq too
  // the rotation, the store and the attention are one kernel
  // (FusedRopeDecodeAttention); else scaled_dot_product_attention with
  // batch.mask.
  at::Tensor AttendDecode(int64_t layer, const DecodeBatch& batch, const at::Tensor& q,
                          const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& rope_inv_freq = at::Tensor(),
                          bool kforge_attention = false);
  // After every layer stored its keys: the slots' lengths grow by `added`.
  void Advance(absl::Span<const int64_t> slots, int64_t added);

 private:
  KvCache(const KvCacheShape& shape, at::Tensor storage);
  bool Allocated(int64_t slot) const;

  KvCacheShape shape_;
  at::Tensor storage_;              // [layers, 2, slots, KVH, max_len, D]
  std::vector<at::Tensor> keys_;    // per layer, views [slots, KVH, max_len, D]
  std::vector<at::Tensor> values_;  // per layer, views [slots, KVH, max_len, D]
  std::vector<int64_t> lengths_;    // per slot; -1 when free
};

}  // namespace kforge

#endif  // KFORGE_MODEL_TRANSFORMER_KV_CACHE_H_
