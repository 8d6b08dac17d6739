// kforge's fused CUDA kernels (model/kernels/fused_kernels.h) against the
// LibTorch ops they replace, on a GPU; in a build without them, that each
// says so instead of running. The decode path that uses them is checked end
// to end by kv_cache_test (decode steps against the uncached forward on the
// GPU) and dense_decoder_test; the sampler's law by
// token_sampler_distribution_test on the GPU.
#include "model/kernels/fused_kernels.h"

#include <cmath>
#include <limits>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/sampling/sampling_params.h"
#include "model/sampling/token_sampler.h"
#include "model/transformer/decoder_layer.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/random_weights.h"
#include "model/transformer/rope.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

bool HaveKernelsAndGpu(std::string* why) {
  if (!FusedKernelsAvailable()) {
    *why = "this build has no kforge CUDA kernels (needs a CUDA LibTorch and nvcc)";
  } else if (!at::hasCUDA()) {
    *why = "no CUDA device";
  }
  return why->empty();
}

#define SKIP_WITHOUT_KERNELS()                              \
  do {                                                      \
    std::string why;                                        \
    if (!HaveKernelsAndGpu(&why)) GTEST_SKIP() << why;      \
  } while (false)

double MaxDifference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kFloat) - b.to(at::kFloat)).abs().max().item<double>();
}

// What `call` threw (a c10::Error, as a LibTorch op throws), or "" when it
// returned.
std::string TorchErrorOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const c10::Error& error) {
    return error.what();
  }
  return "";
}

TEST(FusedKernelsTest, WithoutTheKernelsEveryCallSaysSo) {
  if (FusedKernelsAvailable()) GTEST_SKIP() << "this build has the kernels";
  const at::Tensor x = at::zeros({2, 4});
  EXPECT_FALSE(UseFusedKernels(x));
  EXPECT_THAT(TorchErrorOf([&] { FusedSiluMul(x, x); }), HasSubstr("no kforge CUDA kernels"));
}

TEST(FusedKernelsTest, InputsOnTheCpuOrOfTheWrongDtypeAreRefusedByName) {
  SKIP_WITHOUT_KERNELS();
  const at::Tensor cpu = at::zeros({2, 4});
  EXPECT_FALSE(UseFusedKernels(cpu));
  EXPECT_FALSE(UseFusedKernels(cpu.cuda().requires_grad_()));
  EXPECT_THAT(TorchErrorOf([&] { FusedSiluMul(cpu, cpu); }), HasSubstr("not a CUDA device"));
  const at::Tensor logits =
      at::zeros({2, 8}, at::TensorOptions().device(at::kCUDA).dtype(at::kDouble));
  const at::Tensor column = at::ones({2}, logits.options().dtype(at::kDouble));
  EXPECT_THAT(TorchErrorOf([&] { FusedTemperedSample(logits, column, column * 0.5); }),
              HasSubstr("logits: dtype Double is not float32, bfloat16 or float16"));
}

// q, k, v as the decode step hands them over: views of one [N, 1, (H + 2
// KVH) D] projection, [N, heads, 1, D] after the head split.
struct Projected {
  at::Tensor q, k, v;
};
Projected SplitProjection(const at::Tensor& qkv, int64_t heads, int64_t kv_heads, int64_t dim) {
  const int64_t n = qkv.size(0);
  auto split = [&](int64_t start, int64_t count) {
    return qkv.narrow(-1, start * dim, count * dim).view({n, 1, count, dim}).transpose(1, 2);
  };
  return {split(0, heads), split(heads, kv_heads), split(heads + kv_heads, kv_heads)};
}

void ExpectRopeStoreMatchesTensorOps(at::ScalarType dtype, double tolerance) {
  // 12 q heads and 2 kv heads: more heads than the kernel's warps, so each
  // warp takes several; uneven slots and positions (one at 0, one far out).
  const int64_t n = 5, heads = 12, kv_heads = 2, dim = 128, slots = 7, max_len = 4096;
  const at::TensorOptions on_gpu = at::TensorOptions().device(at::kCUDA);
  at::manual_seed(3);
  const at::Tensor qkv = at::randn({n, 1, (heads + 2 * kv_heads) * dim}, on_gpu).to(dtype);
  const Projected p = SplitProjection(qkv, heads, kv_heads, dim);
  const std::vector<int64_t> position_list = {0, 7, 31, 2, 3000};
  const at::Tensor positions = at::tensor(position_list, at::kLong).to(at::kCUDA);
  const at::Tensor slot_ids =
      at::tensor(std::vector<int64_t>{3, 0, 6, 1, 2}, at::kLong).to(at::kCUDA);
  const at::Tensor inv_freq =
      1.0 / at::pow(1e6, at::arange(0, dim, 2, on_gpu.dtype(at::kFloat)) / dim);

  const at::Tensor cache = at::zeros({2, slots, kv_heads, max_len, dim}, on_gpu.dtype(dtype));
  const at::Tensor keys = cache.select(0, 0), values = cache.select(0, 1);
  const at::Tensor q_rotated =
      FusedRopeStore(p.q, p.k, p.v, inv_freq, positions, slot_ids, keys, values);

  // The same with LibTorch ops: RopeTables and ApplyRope, index_put_.
  const RopeTables rope = MakeRopeTables(inv_freq, positions.unsqueeze(1), dtype);
  const at::Tensor want_q = ApplyRope(p.q, rope);
  const at::Tensor want_k = ApplyRope(p.k, rope);
  ASSERT_TRUE(q_rotated.is_contiguous());
  EXPECT_LT(MaxDifference(q_rotated, want_q), tolerance);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = slot_ids[i].item<int64_t>(), pos = position_list[i];
    EXPECT_LT(MaxDifference(keys[slot].select(1, pos), want_k[i].select(1, 0)), tolerance)
        << "row " << i;
    EXPECT_EQ(MaxDifference(values[slot].select(1, pos), p.v[i].select(1, 0)), 0.0)
        << "row " << i;
  }
  // Nothing else in the cache was written.
  const at::Tensor rest = cache.clone();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = slot_ids[i].item<int64_t>(), pos = position_list[i];
    rest.select(1, slot).select(2, pos).zero_();
  }
  EXPECT_EQ(rest.ne(0).sum().item<int64_t>(), 0);
}

TEST(FusedKernelsTest, RopeStoreRotatesAndStoresAsTensorOpsDoInFloat32) {
  SKIP_WITHOUT_KERNELS();
  ExpectRopeStoreMatchesTensorOps(at::kFloat, 1e-5);
}

TEST(FusedKernelsTest, RopeStoreIsWithinOneRoundingOfTensorOpsInBfloat16) {
  SKIP_WITHOUT_KERNELS();
  // Values are ~N(0, 1) (at most ~5): a bf16 unit in the last place there is
  // 2^-5; the tensor ops round three times, the kernel once.
  ExpectRopeStoreMatchesTensorOps(at::kBFloat16, 0.07);
}

TEST(FusedKernelsTest, SiluMulMatchesTensorOpsOnTheHalvesOfOneProjection) {
  SKIP_WITHOUT_KERNELS();
  at::manual_seed(5);
  // Width 96: 16-byte pieces (the vector kernel); 90: element by element.
  for (const int64_t width : {96, 90}) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const at::Tensor both =
        (at::randn({3, 4, 2 * width}, at::TensorOptions().device(at::kCUDA)) * 4).to(dtype);
    const at::Tensor gate = both.narrow(-1, 0, width), up = both.narrow(-1, width, width);
    const at::Tensor got = FusedSiluMul(gate, up);
    const at::Tensor want = at::silu(gate) * up;
    ASSERT_EQ(got.sizes(), want.sizes());
    // Same roundings as the two ops; expf may differ from LibTorch's exp in
    // the last float bit, which can move a bf16/fp16 rounding by one unit.
    const double unit = dtype == at::kFloat ? 1e-5 : dtype == at::kBFloat16 ? 0.5 : 0.05;
    EXPECT_LT(MaxDifference(got, want), unit) << dtype << ", width " << width;
    EXPECT_GT((got == want).to(at::kFloat).mean().item<double>(), 0.99)
        << dtype << ", width " << width;
  }
  }
}

TEST(FusedKernelsTest, RmsNormRoundsAsTransformersDoes) {
  SKIP_WITHOUT_KERNELS();
  at::manual_seed(29);
  const at::TensorOptions on_gpu = at::TensorOptions().device(at::kCUDA);
  // 1536: 16-byte pieces; 100: element by element. Rows strided (the
  // second half of wider rows) as well as contiguous.
  for (const int64_t width : {1536, 100}) {
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      const at::Tensor wide = (at::randn({5, 1, 2 * width}, on_gpu) * 3).to(dtype);
      const at::Tensor weight = (at::rand({width}, on_gpu) + 0.5).to(dtype);
      const at::Tensor strided = wide.narrow(-1, width, width);
      for (const at::Tensor& x : {strided, strided.contiguous()}) {
        ASSERT_TRUE(FusedRmsNormSupports(x, weight));
        const at::Tensor got = FusedRmsNorm(x, weight, 1e-6);
        const at::Tensor h = x.to(at::kFloat);
        const at::Tensor want =
            weight * (h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + 1e-6)).to(dtype);
        ASSERT_EQ(got.sizes(), x.sizes());
        // The same two roundings; the sum of squares in another order can
        // move a rounding by one unit.
        const double unit = dtype == at::kFloat      ? 1e-5
                            : dtype == at::kBFloat16 ? 1.0 / 128
                                                     : 1.0 / 1024;
        const double scale = want.abs().max().item<double>();
        EXPECT_LT(MaxDifference(got, want), unit * scale) << dtype << ", width " << width;
        // In float32 the roundings are exact and only the sum's order (and
        // rsqrtf) differ; in 16 bits nearly every value rounds the same.
        if (dtype != at::kFloat) {
          EXPECT_GT((got == want).to(at::kFloat).mean().item<double>(), 0.98)
              << dtype << ", width " << width;
        }
      }
    }
  }
  // A q/k-norm view whose rows do not nest is left to LibTorch.
  const at::Tensor qkv = at::randn({2, 1, 4 * 128}, on_gpu);
  EXPECT_FALSE(FusedRmsNormSupports(qkv.narrow(-1, 0, 256).view({2, 1, 2, 128}),
                                    at::ones({128}, on_gpu)));
}

// Training runs RMSNorm with autograd, where kforge's kernel does not apply
// (LibTorch's rms_norm on CUDA): it must round as the kernel and transformers
// do, or a policy would differ from its frozen reference and its sampler by a
// rounding at every norm. A single rounding differs in far more than 2%.
TEST(FusedKernelsTest, RmsNormWithAutogradRoundsAsTheKernelDoes) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  at::manual_seed(31);
  const at::TensorOptions on_gpu = at::TensorOptions().device(at::kCUDA);
  for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    const at::Tensor x = (at::randn({64, 1536}, on_gpu) * 3).to(dtype).requires_grad_();
    const at::Tensor weight = (at::rand({1536}, on_gpu) + 0.5).to(dtype).requires_grad_();
    ASSERT_FALSE(FusedRmsNormSupports(x, weight));
    const at::Tensor got = RmsNorm(x, weight, 1e-6);
    const at::Tensor h = x.detach().to(at::kFloat);
    const at::Tensor want =
        weight.detach() * (h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + 1e-6)).to(dtype);
    EXPECT_GT((got.detach() == want).to(at::kFloat).mean().item<double>(), 0.98) << dtype;
    got.to(at::kFloat).sum().backward();
    EXPECT_TRUE(x.grad().defined() && weight.grad().defined()) << dtype;
  }
}

// The fused sampler against the tensor-op path (on the CPU, where the sampler
// has no kernel) on vocabulary-sized rows: the same draws except where a
// draw lies within rounding of a CDF step, and then the neighbouring token.
TEST(FusedKernelsTest, TemperedSamplingDrawsWhatTheTensorOpPathDraws) {
  SKIP_WITHOUT_KERNELS();
  const int64_t rows = 256, vocab = 151936;
  at::manual_seed(11);
  const at::Tensor logits = at::randn({rows, vocab}) * 3;
  std::vector<RowSamplingParams> params(rows);
  std::vector<uint64_t> steps(rows);
  for (int64_t i = 0; i < rows; ++i) {
    params[i] = {.temperature = i % 3 == 0 ? 0.7 : 1.0, .seed = static_cast<uint64_t>(i)};
    steps[i] = static_cast<uint64_t>(i * 7);
  }
  const TokenSampler sampler({.untruncated_logprobs = true});
  absl::StatusOr<SampledTokens> cpu = sampler.Sample(logits, params, steps);
  absl::StatusOr<SampledTokens> gpu = sampler.Sample(logits.cuda(), params, steps);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const at::Tensor gpu_tokens = gpu->token_ids.cpu();
  int64_t same = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t want = cpu->token_ids[i].item<int64_t>(), got = gpu_tokens[i].item<int64_t>();
    if (got == want) {
      ++same;
    } else {
      EXPECT_EQ(std::abs(got - want), 1) << "row " << i << ": " << got << " against " << want;
    }
  }
  EXPECT_GE(same, rows - 2);
  // The log-probability is log softmax(z / T) at the drawn token.
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t token = gpu_tokens[i].item<int64_t>();
    const double want =
        at::log_softmax(logits[i].to(at::kDouble) / params[i].temperature, 0)[token].item<double>();
    EXPECT_NEAR(gpu->logprobs[i].item<double>(), want, 1e-4) << "row " << i;
    EXPECT_NEAR(gpu->untruncated_logprobs[i].item<double>(), want, 1e-4) << "row " << i;
  }
}

TEST(FusedKernelsTest, TemperedSamplingOfOneRowSharedByAGroupDrawsAsCopiesDo) {
  SKIP_WITHOUT_KERNELS();
  // A prompt's logits expanded to its group (row stride 0), as the generator
  // samples a group's first tokens.
  const at::Tensor row = at::randn({1, 5000}, at::TensorOptions().device(at::kCUDA));
  const at::Tensor temperature = at::full({6}, 0.9, row.options().dtype(at::kDouble));
  const at::Tensor uniform = at::linspace(0.01, 0.99, 6, row.options().dtype(at::kDouble));
  const FusedDraws shared = FusedTemperedSample(row.expand({6, -1}), temperature, uniform);
  const FusedDraws copies = FusedTemperedSample(row.repeat({6, 1}), temperature, uniform);
  EXPECT_TRUE(at::equal(shared.tokens, copies.tokens));
  EXPECT_TRUE(at::equal(shared.logprobs, copies.logprobs));
  // Draws at increasing uniforms walk up the CDF in token order.
  const at::Tensor tokens = shared.tokens.cpu();
  for (int64_t i = 1; i < 6; ++i) {
    EXPECT_LE(tokens[i - 1].item<int64_t>(), tokens[i].item<int64_t>());
  }
}

// The decode step hands the sampler bf16 logits, which it reads as they are:
// the draws of the same values in float32 (the conversion is exact), but for
// a draw within rounding of a chunk's or a token's CDF step. Mass only in
// late chunks (the rest -inf) lands there.
TEST(FusedKernelsTest, TemperedSamplingReadsBfloat16LogitsAsTheirFloat32Values) {
  SKIP_WITHOUT_KERNELS();
  const int64_t rows = 64, vocab = 151936;
  const at::TensorOptions on_gpu = at::TensorOptions().device(at::kCUDA);
  at::manual_seed(5);
  at::Tensor logits = (at::randn({rows, vocab}, on_gpu) * 3).to(at::kBFloat16);
  // Row 0: two equal logits, in chunks 12 and 18 of 8192 tokens; row 1: one.
  logits[0].fill_(-std::numeric_limits<double>::infinity());
  logits[0][100000] = 2.0;
  logits[0][150000] = 2.0;
  logits[1].fill_(-std::numeric_limits<double>::infinity());
  logits[1][vocab - 1] = -3.0;
  const at::Tensor temperature =
      at::linspace(0.5, 1.5, rows, on_gpu.dtype(at::kDouble));
  const at::Tensor uniform = at::rand({rows}, on_gpu.dtype(at::kDouble));
  const FusedDraws from_bf16 = FusedTemperedSample(logits, temperature, uniform);
  const FusedDraws from_float = FusedTemperedSample(logits.to(at::kFloat), temperature, uniform);
  const at::Tensor got = from_bf16.tokens.cpu(), want = from_float.tokens.cpu();
  int64_t same = 0;
  for (int64_t i = 2; i < rows; ++i) {
    if (got[i].item<int64_t>() == want[i].item<int64_t>()) {
      ++same;
    } else {
      EXPECT_EQ(std::abs(got[i].item<int64_t>() - want[i].item<int64_t>()), 1) << "row " << i;
    }
  }
  EXPECT_GE(same, rows - 4);
  EXPECT_NEAR(MaxDifference(from_bf16.logprobs, from_float.logprobs), 0.0, 1e-5);
  // Each logprob is log softmax(z / T) at its token, in float64.
  const at::Tensor exact =
      at::log_softmax(logits.to(at::kDouble) / temperature.unsqueeze(1), 1)
          .gather(1, from_bf16.tokens.unsqueeze(1))
          .squeeze(1);
  EXPECT_NEAR(MaxDifference(from_bf16.logprobs, exact), 0.0, 1e-4);
  const int64_t row0 = got[0].item<int64_t>();
  EXPECT_TRUE(row0 == 100000 || row0 == 150000) << row0;
  EXPECT_NEAR(from_bf16.logprobs[0].item<double>(), std::log(0.5), 1e-6);
  EXPECT_EQ(got[1].item<int64_t>(), vocab - 1);
  EXPECT_NEAR(from_bf16.logprobs[1].item<double>(), 0.0, 1e-6);
}

// Decode attention in float64 with tensor ops: row i, head h attends keys
// and values 0..positions[i] of slot slots[i], kv head h / (H / KVH).
at::Tensor ReferenceDecodeAttention(const at::Tensor& q, const at::Tensor& keys,
                                    const at::Tensor& values,
                                    const std::vector<int64_t>& slots,
                                    const std::vector<int64_t>& positions) {
  const int64_t n = q.size(0), heads = q.size(1), dim = q.size(3);
  const int64_t group = heads / keys.size(1);
  at::Tensor out = at::empty({n, heads, 1, dim}, q.options().dtype(at::kDouble));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t length = positions[i] + 1;
    const at::Tensor k =
        keys[slots[i]].narrow(1, 0, length).to(at::kDouble).repeat_interleave(group, 0);
    const at::Tensor v =
        values[slots[i]].narrow(1, 0, length).to(at::kDouble).repeat_interleave(group, 0);
    const at::Tensor scores =
        at::matmul(q[i].to(at::kDouble), k.transpose(1, 2)) / std::sqrt(static_cast<double>(dim));
    out[i] = at::matmul(at::softmax(scores, -1), v);
  }
  return out;
}

struct AttentionCase {
  at::ScalarType dtype;
  int64_t heads, kv_heads, dim, slots, max_len;
  std::vector<int64_t> slot_list, position_list;
  int64_t max_keys;  // what the caller bounds positions + 1 by
};

void ExpectDecodeAttentionMatchesReference(const AttentionCase& c) {
  const at::TensorOptions on_gpu = at::TensorOptions().device(at::kCUDA);
  const int64_t n = static_cast<int64_t>(c.slot_list.size());
  // Queries scaled so that some rows attend sharply and others broadly.
  const at::Tensor q =
      (at::randn({n, c.heads, 1, c.dim}, on_gpu) * at::rand({n, 1, 1, 1}, on_gpu) * 3)
          .to(c.dtype);
  const at::Tensor cache =
      at::randn({2, c.slots, c.kv_heads, c.max_len, c.dim}, on_gpu).to(c.dtype);
  const at::Tensor keys = cache.select(0, 0), values = cache.select(0, 1);
  ASSERT_TRUE(FusedDecodeAttentionSupports(q, keys));
  const at::Tensor got =
      FusedDecodeAttention(q, keys, values, at::tensor(c.slot_list, at::kLong).to(at::kCUDA),
                           at::tensor(c.position_list, at::kLong).to(at::kCUDA), c.max_keys);
  const at::Tensor want = ReferenceDecodeAttention(q, keys, values, c.slot_list, c.position_list);
  ASSERT_EQ(got.sizes(), want.sizes());
  ASSERT_TRUE(got.is_contiguous());
  // Rounding of the output and of the probabilities in the P V product:
  // a few units in the last place of the element type at the output's scale.
  const double unit = c.dtype == at::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
  const double scale = want.abs().max().item<double>();
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_LT(MaxDifference(got[i], want[i]), 4 * unit * scale)
        << "row " << i << " (slot " << c.slot_list[i] << ", position " << c.position_list[i]
        << "), " << c.dtype << ", " << c.heads << "/" << c.kv_heads << " heads, dim " << c.dim;
  }
}

TEST(FusedKernelsTest, DecodeAttentionMatchesDoublePrecisionAcrossShapesAndSplits) {
  SKIP_WITHOUT_KERNELS();
  at::manual_seed(17);
  // Qwen2.5-1.5B's grouping (6 query heads per kv head), keys split over
  // blocks, lengths from 1 key to the whole slot, slots out of order.
  ExpectDecodeAttentionMatchesReference({at::kBFloat16, 12, 2, 128, 8, 300,
                                         {3, 0, 7, 1, 5}, {0, 299, 15, 16, 150}, 300});
  // 16 query heads per kv head (a full MMA), head_dim 64, float16.
  ExpectDecodeAttentionMatchesReference({at::kHalf, 32, 2, 64, 4, 1000,
                                         {2, 1, 0}, {999, 63, 500}, 1000});
  // One query head per kv head; keys within one block per row (one split).
  ExpectDecodeAttentionMatchesReference({at::kBFloat16, 4, 4, 64, 3, 64,
                                         {1, 2}, {63, 5}, 64});
  // Enough rows that each (row, kv head) is one block: no split merge.
  std::vector<int64_t> slot_list, position_list;
  for (int64_t i = 0; i < 300; ++i) {
    slot_list.push_back(299 - i);
    position_list.push_back((i * 37) % 48);
  }
  ExpectDecodeAttentionMatchesReference({at::kBFloat16, 16, 8, 128, 300, 48,
                                         slot_list, position_list, 48});
}

TEST(FusedKernelsTest, RopeDecodeAttentionEqualsRopeStoreThenDecodeAttention) {
  SKIP_WITHOUT_KERNELS();
  at::manual_seed(31);
  const at::TensorOptions on_gpu = at::TensorOptions().device(at::kCUDA);
  // Few rows, so each row's keys are split over blocks; new tokens at the
  // first and last key of a slab, at 0 and at the slot's end.
  const int64_t n = 5, heads = 12, kv_heads = 2, dim = 128, slots = 6, max_len = 320;
  const std::vector<int64_t> position_list = {0, 15, 16, 300, 319};
  const std::vector<int64_t> slot_list = {4, 0, 5, 2, 1};
  for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    const at::Tensor qkv = at::randn({n, 1, (heads + 2 * kv_heads) * dim}, on_gpu).to(dtype);
    const Projected p = SplitProjection(qkv, heads, kv_heads, dim);
    const at::Tensor positions = at::tensor(position_list, at::kLong).to(at::kCUDA);
    const at::Tensor slot_ids = at::tensor(slot_list, at::kLong).to(at::kCUDA);
    const at::Tensor inv_freq =
        1.0 / at::pow(1e6, at::arange(0, dim, 2, on_gpu.dtype(at::kFloat)) / dim);
    const at::Tensor cache =
        at::randn({2, slots, kv_heads, max_len, dim}, on_gpu).to(dtype);
    const at::Tensor two_kernels = cache.clone(), one_kernel = cache.clone();

    const at::Tensor q_rotated =
        FusedRopeStore(p.q, p.k, p.v, inv_freq, positions, slot_ids, two_kernels.select(0, 0),
                       two_kernels.select(0, 1));
    const at::Tensor want = FusedDecodeAttention(q_rotated, two_kernels.select(0, 0),
                                                 two_kernels.select(0, 1), slot_ids, positions,
                                                 max_len);
    const at::Tensor got =
        FusedRopeDecodeAttention(p.q, p.k, p.v, inv_freq, one_kernel.select(0, 0),
                                 one_kernel.select(0, 1), slot_ids, positions, max_len);
    // The same roundings (FMA contraction aside): equal to a unit in the
    // last place, and the caches alike.
    const double unit = dtype == at::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
    EXPECT_LT(MaxDifference(got, want), unit * want.abs().max().item<double>()) << dtype;
    EXPECT_LT(MaxDifference(one_kernel, two_kernels), unit * 8) << dtype;
    EXPECT_GT((one_kernel == two_kernels).to(at::kFloat).mean().item<double>(), 0.9999) << dtype;
  }
}

TEST(FusedKernelsTest, DecodeAttentionRefusesWhatItDoesNotTakeByName) {
  SKIP_WITHOUT_KERNELS();
  const at::TensorOptions on_gpu = at::TensorOptions().device(at::kCUDA);
  const at::Tensor keys = at::zeros({2, 2, 16, 128}, on_gpu.dtype(at::kBFloat16));
  const at::Tensor index = at::zeros({1}, on_gpu.dtype(at::kLong));
  EXPECT_TRUE(FusedDecodeAttentionSupports(at::zeros({1, 12, 1, 128}, keys.options()), keys));
  const at::Tensor fp32 = at::zeros({1, 12, 1, 128}, on_gpu);
  EXPECT_FALSE(FusedDecodeAttentionSupports(fp32, keys.to(at::kFloat)));
  EXPECT_THAT(TorchErrorOf([&] {
                FusedDecodeAttention(fp32, keys.to(at::kFloat), keys.to(at::kFloat), index,
                                     index, 16);
              }),
              HasSubstr("FusedDecodeAttention does not take"));
  // 34 query heads over 2 kv heads: 17 per kv head, more than one MMA holds.
  EXPECT_FALSE(FusedDecodeAttentionSupports(at::zeros({1, 34, 1, 128}, keys.options()), keys));
  const at::Tensor dim96 = at::zeros({2, 2, 16, 96}, keys.options());
  EXPECT_FALSE(FusedDecodeAttentionSupports(at::zeros({1, 12, 1, 96}, keys.options()), dim96));
  const at::Tensor q = at::zeros({1, 12, 1, 128}, keys.options());
  EXPECT_THAT(TorchErrorOf([&] { FusedDecodeAttention(q, keys, keys, index, index, 17); }),
              HasSubstr("max_keys 17 must be in 1..16"));
}

// A bfloat16 model's decode steps with kforge's attention against the same
// model with LibTorch's SDPA: ragged lengths, slots out of order.
TEST(FusedKernelsTest, DecodeStepsWithKforgeAttentionMatchSdpaInBfloat16) {
  SKIP_WITHOUT_KERNELS();
  ModelConfig config = TinyDecoderConfig(Architecture::kQwen2);
  config.head_dim = 64;
  config.num_attention_heads = 6;
  config.num_key_value_heads = 2;
  config.hidden_size = 96;
  const absl::StatusOr<TensorMap> weights = RandomDecoderWeights(config, 5);
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::unique_ptr<DecoderModel> models[2];
  std::unique_ptr<KvCache> caches[2];
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::unique_ptr<DecoderModel>> model = DecoderModel::Create(
        config, TensorMapSource(*weights),
        {.device = at::kCUDA, .dtype = at::kBFloat16, .kforge_decode_attention = i == 0});
    ASSERT_TRUE(model.ok()) << model.status();
    models[i] = *std::move(model);
    absl::StatusOr<std::unique_ptr<KvCache>> cache = models[i]->NewKvCache(4, 200);
    ASSERT_TRUE(cache.ok()) << cache.status();
    caches[i] = *std::move(cache);
  }
  c10::NoGradGuard no_grad;
  const std::vector<int64_t> lengths = {3, 150, 40};
  for (int i = 0; i < 2; ++i) {
    for (int64_t slot = 0; slot < 3; ++slot) {
      std::vector<int64_t> prompt;
      for (int64_t j = 0; j < lengths[slot]; ++j) prompt.push_back((slot * 13 + j * 7) % 60 + 2);
      ASSERT_TRUE(caches[i]->Allocate().ok());
      ASSERT_TRUE(models[i]->Prefill(caches[i].get(), slot, prompt).ok());
    }
  }
  for (int step = 0; step < 4; ++step) {
    const std::vector<int64_t> slots = {2, 0, 1}, tokens = {5 + step, 9, 17};
    absl::StatusOr<at::Tensor> got = models[0]->DecodeStep(caches[0].get(), slots, tokens);
    absl::StatusOr<at::Tensor> want = models[1]->DecodeStep(caches[1].get(), slots, tokens);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    // Logits of a bfloat16 model: both paths round differently; the
    // attention outputs differ by a unit or two of bf16, as the logits do.
    const double scale = want->abs().max().item<double>();
    EXPECT_LT(MaxDifference(*got, *want), 0.05 * scale) << "step " << step;
    EXPECT_TRUE(at::equal(got->argmax(-1), want->argmax(-1))) << "step " << step;
  }
}

}  // namespace
}  // namespace kforge
