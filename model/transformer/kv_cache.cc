#include "model/transformer/kv_cache.h"

#include <algorithm>
#include <utility>

#include <ATen/TensorIndexing.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/kernels/fused_kernels.h"
#include "model/transformer/attention.h"
#include "model/transformer/int64_tensor.h"
#include "model/transformer/torch_status.h"

namespace kforge {
namespace {

using at::indexing::Slice;

absl::Status CheckShape(const KvCacheShape& s) {
  if (s.layers > 0 && s.slots > 0 && s.kv_heads > 0 && s.max_len > 0 && s.head_dim > 0) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "kv cache: every size must be positive, got layers ", s.layers, ", slots ", s.slots,
      ", kv_heads ", s.kv_heads, ", max_len ", s.max_len, ", head_dim ", s.head_dim));
}

// first when slots are first, first+1, ...; -1 otherwise. A contiguous run
// lets the decode step read the cache through a view instead of a gather.
int64_t ContiguousStart(absl::Span<const int64_t> slots) {
  for (size_t i = 1; i < slots.size(); ++i) {
    if (slots[i] != slots[0] + static_cast<int64_t>(i)) return -1;
  }
  return slots[0];
}

// k, v [N, KVH, 1, D] stored at each row's slot and position.
void StoreDecodeKv(at::Tensor& keys, at::Tensor& values, const KvCache::DecodeBatch& batch,
                   const at::Tensor& k, const at::Tensor& v) {
  // Advanced indices on dims 0 and 2 put N first: the target is [N, KVH, D].
  keys.index_put_({batch.slots, Slice(), batch.positions}, k.squeeze(2));
  values.index_put_({batch.slots, Slice(), batch.positions}, v.squeeze(2));
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheShape& shape,
                                                         const at::TensorOptions& options) {
  if (absl::Status status = CheckShape(shape); !status.ok()) return status;
  at::Tensor storage;
  try {
    // Zeros, not empty: masked positions are multiplied by a zero weight, and
    // 0 * NaN from uninitialised memory would poison the output.
    storage = at::zeros(
        {shape.layers, 2, shape.slots, shape.kv_heads, shape.max_len, shape.head_dim}, options);
  } catch (const c10::Error& error) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "kv cache of ", shape.layers, " layers x ", shape.slots, " slots x ", shape.max_len,
        " tokens: ", error.what_without_backtrace()));
  }
  return std::unique_ptr<KvCache>(new KvCache(shape, std::move(storage)));
}

KvCache::KvCache(const KvCacheShape& shape, at::Tensor storage)
    : shape_(shape),
      storage_(std::move(storage)),
      lengths_(static_cast<size_t>(shape.slots), -1) {
  for (int64_t layer = 0; layer < shape.layers; ++layer) {
    keys_.push_back(storage_.select(0, layer).select(0, 0));
    values_.push_back(storage_.select(0, layer).select(0, 1));
  }
}

bool KvCache::Allocated(int64_t slot) const {
  return slot >= 0 && slot < shape_.slots && lengths_[static_cast<size_t>(slot)] >= 0;
}

int64_t KvCache::length(int64_t slot) const {
  return Allocated(slot) ? lengths_[static_cast<size_t>(slot)] : -1;
}

int64_t KvCache::free_slots() const {
  int64_t count = 0;
  for (int64_t length : lengths_) count += length < 0 ? 1 : 0;
  return count;
}

absl::StatusOr<int64_t> KvCache::Allocate() {
  for (size_t i = 0; i < lengths_.size(); ++i) {
    if (lengths_[i] < 0) {
      lengths_[i] = 0;
      return static_cast<int64_t>(i);
    }
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("kv cache: all ", shape_.slots, " slots are in use"));
}

absl::Status KvCache::Free(int64_t slot) {
  if (!Allocated(slot)) {
    return absl::FailedPreconditionError(
        absl::StrCat("kv cache: slot ", slot, " is not allocated"));
  }
  lengths_[static_cast<size_t>(slot)] = -1;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> KvCache::Fork(int64_t source, int64_t count) {
  if (!Allocated(source)) {
    return absl::FailedPreconditionError(
        absl::StrCat("kv cache: fork source slot ", source, " is not allocated"));
  }
  if (count < 0 || count > free_slots()) {
    return absl::ResourceExhaustedError(absl::StrCat("kv cache: cannot fork ", count,
                                                     " slots, ", free_slots(), " free"));
  }
  const int64_t length = lengths_[static_cast<size_t>(source)];
  std::vector<int64_t> forked;
  for (size_t i = 0; i < lengths_.size() && static_cast<int64_t>(forked.size()) < count; ++i) {
    if (lengths_[i] < 0) forked.push_back(static_cast<int64_t>(i));
  }
  if (count == 0 || length == 0) {
    for (int64_t slot : forked) lengths_[static_cast<size_t>(slot)] = length;
    return forked;
  }
  absl::Status copied = TorchCall("kv cache fork", [&] {
    const at::Tensor targets = Int64Tensor(forked, storage_.device());
    // One copy for every layer: the source prefix broadcast to every target.
    const at::Tensor prefix = storage_.narrow(2, source, 1).narrow(4, 0, length);
    storage_.narrow(4, 0, length)
        .index_put_({Slice(), Slice(), targets},
                    prefix.expand({-1, -1, count, -1, -1, -1}));
    return absl::OkStatus();
  });
  if (!copied.ok()) return copied;
  for (int64_t slot : forked) lengths_[static_cast<size_t>(slot)] = length;
  return forked;
}

absl::Status KvCache::Move(int64_t from, int64_t to) {
  if (!Allocated(from)) {
    return absl::FailedPreconditionError(
        absl::StrCat("kv cache: move source slot ", from, " is not allocated"));
  }
  if (to < 0 || to >= shape_.slots || Allocated(to)) {
    return absl::FailedPreconditionError(
        absl::StrCat("kv cache: move target slot ", to, " is not a free slot"));
  }
  const int64_t length = lengths_[static_cast<size_t>(from)];
  if (length > 0) {
    KF_RETURN_IF_ERROR(TorchCall("kv cache move", [&] {
      storage_.select(2, to).narrow(3, 0, length).copy_(
          storage_.select(2, from).narrow(3, 0, length));
      return absl::OkStatus();
    }));
  }
  lengths_[static_cast<size_t>(to)] = length;
  lengths_[static_cast<size_t>(from)] = -1;
  return absl::OkStatus();
}

absl::Status KvCache::CheckAppend(int64_t slot, int64_t added) const {
  if (!Allocated(slot)) {
    return absl::FailedPreconditionError(
        absl::StrCat("kv cache: slot ", slot, " is not allocated"));
  }
  const int64_t length = lengths_[static_cast<size_t>(slot)];
  if (length + added > shape_.max_len) {
    return absl::OutOfRangeError(absl::StrCat("kv cache: slot ", slot, " holds ", length,
                                              " tokens; ", added, " more exceed max_len ",
                                              shape_.max_len));
  }
  return absl::OkStatus();
}

at::Tensor KvCache::AttendPrefill(int64_t layer, int64_t slot, const at::Tensor& q,
                                  const at::Tensor& k, const at::Tensor& v) {
  const int64_t start = lengths_[static_cast<size_t>(slot)];
  const int64_t count = k.size(2);
  at::Tensor& keys = keys_[static_cast<size_t>(layer)];
  at::Tensor& values = values_[static_cast<size_t>(layer)];
  keys.select(0, slot).narrow(1, start, count).copy_(k.select(0, 0));
  values.select(0, slot).narrow(1, start, count).copy_(v.select(0, 0));
  // A fresh prompt attends only to itself: no need to read the cache back.
  if (start == 0) return Attend(q, k, v, AttentionMask::Causal());
  const at::Tensor mask = OffsetCausalMask(start, count, keys.device());
  return Attend(q, keys.narrow(0, slot, 1).narrow(2, 0, start + count),
                values.narrow(0, slot, 1).narrow(2, 0, start + count),
                AttentionMask::Explicit(mask));
}

absl::StatusOr<int64_t> KvCache::CheckDecode(absl::Span<const int64_t> slots) const {
  if (slots.empty()) return absl::InvalidArgumentError("kv cache: decode step with no slots");
  absl::flat_hash_set<int64_t> seen;
  int64_t longest = 0;
  for (int64_t slot : slots) {
    if (absl::Status status = CheckAppend(slot, 1); !status.ok()) return status;
    if (!seen.insert(slot).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv cache: slot ", slot, " appears twice in one decode step"));
    }
    longest = std::max(longest, lengths_[static_cast<size_t>(slot)]);
  }
  return longest;
}

absl::StatusOr<KvCache::DecodeBatch> KvCache::MakeDecodeBatch(absl::Span<const int64_t> slots,
                                                               bool with_mask) const {
  KF_ASSIGN_OR_RETURN(const int64_t longest, CheckDecode(slots));
  std::vector<int64_t> positions;
  for (int64_t slot : slots) positions.push_back(lengths_[static_cast<size_t>(slot)]);
  return TorchCall("kv cache decode batch", [&] {
    const at::Device device = storage_.device();
    DecodeBatch batch;
    batch.slots = Int64Tensor(slots, device);
    batch.positions = Int64Tensor(positions, device);
    batch.span = longest + 1;
    if (with_mask) {
      batch.mask =
          AdditiveMask(RaggedDecodeMask(batch.positions, batch.span), storage_.scalar_type());
    }
    batch.first = ContiguousStart(slots);
    return batch;
  });
}

KvCache::DecodeBatch KvCache::DenseDecodeBatch(const at::Tensor& positions, int64_t span,
                                               bool with_mask) const {
  DecodeBatch batch;
  batch.slots = at::arange(positions.size(0), positions.options().dtype(at::kLong));
  batch.positions = positions;
  batch.span = span;
  if (with_mask) {
    batch.mask = AdditiveMask(RaggedDecodeMask(positions, span), storage_.scalar_type());
  }
  batch.first = 0;
  return batch;
}

at::Tensor KvCache::AttendDecode(int64_t layer, const DecodeBatch& batch, const at::Tensor& q,
                                 const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& rope_inv_freq, bool kforge_attention) {
  at::Tensor& keys = keys_[static_cast<size_t>(layer)];
  at::Tensor& values = values_[static_cast<size_t>(layer)];
  if (kforge_attention && FusedDecodeAttentionSupports(q, keys)) {
    if (rope_inv_freq.defined()) {
      return FusedRopeDecodeAttention(q, k, v, rope_inv_freq, keys, values, batch.slots,
                                      batch.positions, batch.span);
    }
    StoreDecodeKv(keys, values, batch, k, v);
    return FusedDecodeAttention(q, keys, values, batch.slots, batch.positions, batch.span);
  }
  at::Tensor query = q;
  if (rope_inv_freq.defined()) {
    query = FusedRopeStore(q, k, v, rope_inv_freq, batch.positions, batch.slots, keys, values);
  } else {
    StoreDecodeKv(keys, values, batch, k, v);
  }
  TORCH_CHECK(batch.mask.defined(), "kv cache: a decode batch built without its mask reached "
              "scaled_dot_product_attention (layer ", layer, ")");
  const int64_t n = batch.slots.size(0);
  at::Tensor read_keys, read_values;
  if (batch.first >= 0) {
    read_keys = keys.narrow(0, batch.first, n).narrow(2, 0, batch.span);
    read_values = values.narrow(0, batch.first, n).narrow(2, 0, batch.span);
  } else {
    read_keys = keys.narrow(2, 0, batch.span).index_select(0, batch.slots);
    read_values = values.narrow(2, 0, batch.span).index_select(0, batch.slots);
  }
  return Attend(query, read_keys, read_values, AttentionMask::Explicit(batch.mask));
}

void KvCache::Advance(absl::Span<const int64_t> slots, int64_t added) {
  for (int64_t slot : slots) lengths_[static_cast<size_t>(slot)] += added;
}

}  // namespace kforge
