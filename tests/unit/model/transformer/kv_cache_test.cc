// The cached path (Prefill, DecodeStep, Fork) against the uncached Forward on
// the same tokens: slots at ragged lengths, arbitrary subsets and orders of
// slots per step, groups sharing a prompt; and the slot bookkeeping errors.
// Each case also runs on a GPU where there is one (float32): there a decode
// step rotates and stores keys with kforge's fused kernel while Forward
// rotates with LibTorch ops, so the two paths check each other.
#include "model/transformer/kv_cache.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "model/transformer/decoder_model.h"
#include "model/transformer/random_weights.h"

namespace kforge {
namespace {

constexpr double kTolerance = 1e-4;

// (architecture, on a CUDA device)
class KvCacheTest : public ::testing::TestWithParam<std::tuple<Architecture, bool>> {
 protected:
  void SetUp() override {
    if (std::get<1>(GetParam())) {
      if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this LibTorch build or machine";
      device_ = at::Device("cuda:0");
    }
    config_ = TinyDecoderConfig(std::get<0>(GetParam()));
    absl::StatusOr<std::unique_ptr<DecoderModel>> model =
        DecoderModel::Create(config_, TensorMapSource(*RandomDecoderWeights(config_, 21)),
                             DecoderOptions{.device = device_});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  std::unique_ptr<KvCache> NewCache(int64_t slots, int64_t max_len) {
    absl::StatusOr<std::unique_ptr<KvCache>> cache = model_->NewKvCache(slots, max_len);
    EXPECT_TRUE(cache.ok()) << cache.status();
    return cache.ok() ? *std::move(cache) : nullptr;
  }

  // The uncached logits after the last of `tokens`: [V].
  at::Tensor ExpectedNext(const std::vector<int64_t>& tokens) {
    absl::StatusOr<at::Tensor> logits = model_->Forward(at::tensor(tokens, at::kLong).unsqueeze(0));
    EXPECT_TRUE(logits.ok()) << logits.status();
    return logits.ok() ? (*logits)[0][-1] : at::Tensor();
  }

  at::Tensor Prefill(KvCache* cache, int64_t slot, const std::vector<int64_t>& tokens) {
    absl::StatusOr<at::Tensor> logits = model_->Prefill(cache, slot, tokens);
    EXPECT_TRUE(logits.ok()) << logits.status();
    return logits.ok() ? *logits : at::Tensor();  // undefined: later checks throw, and fail
  }

  at::Tensor Decode(KvCache* cache, const std::vector<int64_t>& slots,
                    const std::vector<int64_t>& tokens) {
    absl::StatusOr<at::Tensor> logits = model_->DecodeStep(cache, slots, tokens);
    EXPECT_TRUE(logits.ok()) << logits.status();
    return logits.ok() ? *logits : at::Tensor();
  }

  // int64 on the model's device.
  at::Tensor OnDevice(const std::vector<int64_t>& values) const {
    return at::tensor(values, at::kLong).to(device_);
  }

  at::Device device_ = at::kCPU;
  ModelConfig config_;
  std::unique_ptr<DecoderModel> model_;
};

double MaxDifference(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

TEST_P(KvCacheTest, PrefillThenRaggedDecodeStepsMatchUncachedForward) {
  std::unique_ptr<KvCache> cache = NewCache(/*slots=*/5, /*max_len=*/32);
  // Slots 1, 2, 4 (0 and 3 stay free) with prompts of 5, 3 and 7 tokens.
  std::map<int64_t, std::vector<int64_t>> sequences = {
      {1, {5, 9, 2, 61, 30}}, {2, {44, 1, 7}}, {4, {3, 3, 8, 12, 50, 6, 19}}};
  for (int64_t i = 0; i < 5; ++i) ASSERT_EQ(*cache->Allocate(), i);
  for (int64_t free_slot : {0, 3}) ASSERT_TRUE(cache->Free(free_slot).ok());
  for (auto& [slot, tokens] : sequences) {
    EXPECT_LT(MaxDifference(Prefill(cache.get(), slot, tokens), ExpectedNext(tokens)), kTolerance);
  }
  // Each step names some of the slots, in any order; lengths drift apart.
  const std::vector<std::vector<int64_t>> steps = {{1, 2, 4}, {4, 1}, {2}, {2, 4, 1}, {1, 2}, {4}};
  int64_t next_token = 10;
  for (const std::vector<int64_t>& step : steps) {
    std::vector<int64_t> tokens;
    for (int64_t slot : step) {
      tokens.push_back(next_token++ % config_.vocab_size);
      sequences[slot].push_back(tokens.back());
    }
    const at::Tensor logits = Decode(cache.get(), step, tokens);
    ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{static_cast<int64_t>(step.size()),
                                                     config_.vocab_size}));
    for (size_t i = 0; i < step.size(); ++i) {
      EXPECT_LT(MaxDifference(logits[static_cast<int64_t>(i)], ExpectedNext(sequences[step[i]])),
                kTolerance)
          << "slot " << step[i] << " at length " << sequences[step[i]].size();
    }
  }
  for (auto& [slot, tokens] : sequences) {
    EXPECT_EQ(cache->length(slot), static_cast<int64_t>(tokens.size()));
  }
}

TEST_P(KvCacheTest, ContiguousSlotsDecodeLikeScatteredOnes) {
  // Slots 0..2 in order take the cache's view path; the same sequences in
  // slots {2, 0, 1} take the gather path. Both must equal the forward.
  std::unique_ptr<KvCache> cache = NewCache(3, 16);
  const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3, 4}, {5, 6}, {7, 8, 9}};
  for (int64_t slot = 0; slot < 3; ++slot) {
    ASSERT_EQ(*cache->Allocate(), slot);
    Prefill(cache.get(), slot, prompts[static_cast<size_t>(slot)]);
  }
  const at::Tensor in_order = Decode(cache.get(), {0, 1, 2}, {11, 12, 13});
  const at::Tensor shuffled = Decode(cache.get(), {2, 0, 1}, {23, 21, 22});
  const std::vector<std::vector<int64_t>> after_first = {{1, 2, 3, 4, 11}, {5, 6, 12},
                                                         {7, 8, 9, 13}};
  for (int64_t slot = 0; slot < 3; ++slot) {
    EXPECT_LT(MaxDifference(in_order[slot], ExpectedNext(after_first[static_cast<size_t>(slot)])),
              kTolerance);
  }
  EXPECT_LT(MaxDifference(shuffled[0], ExpectedNext({7, 8, 9, 13, 23})), kTolerance);
  EXPECT_LT(MaxDifference(shuffled[1], ExpectedNext({1, 2, 3, 4, 11, 21})), kTolerance);
  EXPECT_LT(MaxDifference(shuffled[2], ExpectedNext({5, 6, 12, 22})), kTolerance);
}

TEST_P(KvCacheTest, ForkedGroupMatchesSeparatePrefills) {
  const std::vector<int64_t> prompt = {17, 4, 33, 2, 9, 58};
  std::unique_ptr<KvCache> shared = NewCache(6, 24);
  const int64_t first = *shared->Allocate();
  const at::Tensor prompt_logits = Prefill(shared.get(), first, prompt);
  absl::StatusOr<std::vector<int64_t>> forked = shared->Fork(first, 3);
  ASSERT_TRUE(forked.ok()) << forked.status();
  std::vector<int64_t> group = {first};
  group.insert(group.end(), forked->begin(), forked->end());
  std::vector<std::vector<int64_t>> sequences(group.size(), prompt);
  for (int64_t slot : group) EXPECT_EQ(shared->length(slot), 6);
  for (int step = 0; step < 4; ++step) {
    std::vector<int64_t> tokens;
    for (size_t i = 0; i < group.size(); ++i) {
      tokens.push_back(static_cast<int64_t>((7 * i + 3 * step + 1) % 64));
      sequences[i].push_back(tokens.back());
    }
    const at::Tensor logits = Decode(shared.get(), group, tokens);
    // Each sample, prefilled alone in a cache of its own, must agree.
    for (size_t i = 0; i < group.size(); ++i) {
      std::unique_ptr<KvCache> alone = NewCache(1, 24);
      const at::Tensor expected = Prefill(alone.get(), *alone->Allocate(), sequences[i]);
      EXPECT_LT(MaxDifference(logits[static_cast<int64_t>(i)], expected), kTolerance)
          << "sample " << i << " step " << step;
    }
  }
  EXPECT_LT(MaxDifference(prompt_logits, ExpectedNext(prompt)), kTolerance);
}

TEST_P(KvCacheTest, PrefillInChunksEqualsOnePrefill) {
  std::unique_ptr<KvCache> cache = NewCache(1, 16);
  const int64_t slot = *cache->Allocate();
  Prefill(cache.get(), slot, {4, 5, 6});
  const at::Tensor chunked = Prefill(cache.get(), slot, {7, 8, 9, 10});
  EXPECT_EQ(cache->length(slot), 7);
  EXPECT_LT(MaxDifference(chunked, ExpectedNext({4, 5, 6, 7, 8, 9, 10})), kTolerance);
  const at::Tensor next = Decode(cache.get(), {slot}, {11});
  EXPECT_LT(MaxDifference(next[0], ExpectedNext({4, 5, 6, 7, 8, 9, 10, 11})), kTolerance);
}

TEST_P(KvCacheTest, FreedSlotStartsOverClean) {
  std::unique_ptr<KvCache> cache = NewCache(1, 16);
  const int64_t slot = *cache->Allocate();
  Prefill(cache.get(), slot, {1, 2, 3, 4, 5, 6, 7, 8});
  ASSERT_TRUE(cache->Free(slot).ok());
  ASSERT_EQ(*cache->Allocate(), slot);
  EXPECT_EQ(cache->length(slot), 0);
  EXPECT_LT(MaxDifference(Prefill(cache.get(), slot, {9, 10}), ExpectedNext({9, 10})), kTolerance);
  EXPECT_LT(MaxDifference(Decode(cache.get(), {slot}, {11})[0], ExpectedNext({9, 10, 11})),
            kTolerance);
}

TEST_P(KvCacheTest, MovedSlotDecodesLikeItsSource) {
  std::unique_ptr<KvCache> cache = NewCache(4, 16);
  const int64_t source = *cache->Allocate();
  Prefill(cache.get(), source, {3, 1, 4, 1, 5});
  ASSERT_TRUE(cache->Move(source, 2).ok());
  EXPECT_EQ(cache->length(source), -1);
  EXPECT_EQ(cache->length(2), 5);
  EXPECT_LT(MaxDifference(Decode(cache.get(), {2}, {9})[0], ExpectedNext({3, 1, 4, 1, 5, 9})),
            kTolerance);
  // Moving onto an allocated slot, or from a free one, is refused.
  const int64_t other = *cache->Allocate();
  EXPECT_EQ(cache->Move(2, other).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache->Move(3, 1).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(KvCacheTest, DenseDecodeOfSlotsFromZeroMatchesTheDecodeStep) {
  const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {4, 5, 6, 7, 8, 9}, {10}};
  std::unique_ptr<KvCache> sparse = NewCache(3, 16);
  std::unique_ptr<KvCache> dense = NewCache(4, 16);
  std::vector<int64_t> slots, positions;
  for (const std::vector<int64_t>& prompt : prompts) {
    const int64_t slot = *sparse->Allocate();
    ASSERT_EQ(*dense->Allocate(), slot);
    Prefill(sparse.get(), slot, prompt);
    Prefill(dense.get(), slot, prompt);
    slots.push_back(slot);
    positions.push_back(static_cast<int64_t>(prompt.size()));
  }
  const std::vector<int64_t> tokens = {11, 12, 13};
  const at::Tensor expected = Decode(sparse.get(), slots, tokens);
  // A span longer than the longest row reads masked keys only beyond it; a
  // fourth row is padding for free slot 3 (token 0 at position 0).
  const at::Tensor got =
      model_->DecodeDense(dense.get(), OnDevice({11, 12, 13, 0}), OnDevice({3, 6, 1, 0}), 12)
          .to(at::kFloat);
  EXPECT_LT(MaxDifference(got.narrow(0, 0, 3), expected), kTolerance);
  // The same step into a caller's buffer, as a CUDA graph's output buffer
  // takes it (it writes the same keys and values again): the same logits,
  // and the buffer itself is returned. One of another shape is refused by
  // name before anything runs.
  const at::Tensor into =
      at::empty({4, got.size(1)}, at::TensorOptions()
                                      .dtype(model_->options().dtype)
                                      .device(model_->options().device));
  const at::Tensor returned = model_->DecodeDense(dense.get(), OnDevice({11, 12, 13, 0}),
                                                  OnDevice({3, 6, 1, 0}), 12, into);
  EXPECT_EQ(returned.data_ptr(), into.data_ptr());
  EXPECT_LT(MaxDifference(into.narrow(0, 0, 3).to(at::kFloat), expected), kTolerance);
  std::string refused;
  try {
    (void)model_->DecodeDense(dense.get(), OnDevice({11, 12, 13, 0}), OnDevice({3, 6, 1, 0}), 12,
                              into.narrow(0, 0, 3));
  } catch (const c10::Error& error) {
    refused = error.what_without_backtrace();
  }
  EXPECT_NE(refused.find("decode logits_out must be contiguous"), std::string::npos) << refused;
  // What the padding row wrote into the free slot is forgotten once the slot
  // is allocated and filled.
  ASSERT_EQ(*dense->Allocate(), 3);
  EXPECT_LT(MaxDifference(Prefill(dense.get(), 3, {7, 8}), ExpectedNext({7, 8})), kTolerance);
  EXPECT_LT(MaxDifference(Decode(dense.get(), {3}, {9})[0], ExpectedNext({7, 8, 9})), kTolerance);
}

std::string CaseName(const ::testing::TestParamInfo<std::tuple<Architecture, bool>>& info) {
  const std::string device = std::get<1>(info.param) ? "Cuda" : "Cpu";
  switch (std::get<0>(info.param)) {
    case Architecture::kLlama: return "Llama" + device;
    case Architecture::kQwen2: return "Qwen2" + device;
    case Architecture::kQwen3: return "Qwen3" + device;
  }
  return "Unknown" + device;
}

INSTANTIATE_TEST_SUITE_P(Architectures, KvCacheTest,
                         ::testing::Combine(::testing::Values(Architecture::kLlama,
                                                              Architecture::kQwen2,
                                                              Architecture::kQwen3),
                                            ::testing::Bool()),
                         CaseName);

class KvCacheSlotsTest : public KvCacheTest {};

TEST_P(KvCacheSlotsTest, SlotBookkeepingErrorsAreReported) {
  std::unique_ptr<KvCache> cache = NewCache(2, 4);
  const int64_t a = *cache->Allocate(), b = *cache->Allocate();
  EXPECT_EQ(cache->Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache->Fork(a, 1).status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(cache->Free(b).ok());
  EXPECT_EQ(cache->Free(b).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache->length(b), -1);
  EXPECT_EQ(model_->DecodeStep(cache.get(), {b}, {1}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(model_->Prefill(cache.get(), a, {1, 2, 3, 4, 5}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(cache->length(a), 0);  // a failed prefill stores nothing
  EXPECT_EQ(model_->DecodeStep(cache.get(), {a, a}, {1, 2}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->DecodeStep(cache.get(), {a}, {1, 2}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->length(a), 0);
  Prefill(cache.get(), a, {1, 2, 3, 4});
  EXPECT_EQ(model_->DecodeStep(cache.get(), {a}, {1}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(model_->Prefill(cache.get(), a, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->Prefill(cache.get(), b, {config_.vocab_size}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(KvCacheSlotsTest, CacheOfAnotherShapeIsRejected) {
  absl::StatusOr<std::unique_ptr<KvCache>> wrong =
      KvCache::Create({.layers = 1, .slots = 1, .kv_heads = 2, .max_len = 4, .head_dim = 8},
                      at::TensorOptions().dtype(at::kFloat));
  ASSERT_TRUE(wrong.ok());
  const int64_t slot = *(*wrong)->Allocate();
  EXPECT_EQ(model_->Prefill(wrong->get(), slot, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvCache::Create({.layers = 1, .slots = 0, .kv_heads = 2, .max_len = 4, .head_dim = 8},
                            at::TensorOptions())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Llama, KvCacheSlotsTest,
                         ::testing::Values(std::tuple{Architecture::kLlama, false}), CaseName);

}  // namespace
}  // namespace kforge
