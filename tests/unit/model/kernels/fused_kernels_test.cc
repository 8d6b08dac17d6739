// kforge's fused CUDA kernels (model/kernels/fused_kernels.h) against the
// LibTorch ops they replace, on a GPU; in a build without them, that each
// says so instead of running. The decode path that uses them is checked end
// to end by kv_cache_test (decode steps against the uncached forward on the
// GPU) and dense_decoder_test; the sampler's law by
// token_sampler_distribution_test on the GPU.
#include "model/kernels/fused_kernels.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/util/Exception.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/sampling/sampling_params.h"
#include "model/sampling/token_sampler.h"
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
      at::zeros({2, 8}, at::TensorOptions().device(at::kCUDA).dtype(at::kHalf));
  const at::Tensor column = at::ones({2}, logits.options().dtype(at::kDouble));
  EXPECT_THAT(TorchErrorOf([&] { FusedTemperedSample(logits, column, column * 0.5); }),
              HasSubstr("logits must be float32"));
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
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const at::Tensor both = (at::randn({3, 4, 2 * 96}, at::TensorOptions().device(at::kCUDA)) * 4)
                                .to(dtype);
    const at::Tensor gate = both.narrow(-1, 0, 96), up = both.narrow(-1, 96, 96);
    const at::Tensor got = FusedSiluMul(gate, up);
    const at::Tensor want = at::silu(gate) * up;
    ASSERT_EQ(got.sizes(), want.sizes());
    // Same roundings as the two ops; expf may differ from LibTorch's exp in
    // the last float bit, which can move a bf16/fp16 rounding by one unit.
    const double unit = dtype == at::kFloat ? 1e-5 : dtype == at::kBFloat16 ? 0.5 : 0.05;
    EXPECT_LT(MaxDifference(got, want), unit) << dtype;
    EXPECT_GT((got == want).to(at::kFloat).mean().item<double>(), 0.99) << dtype;
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

}  // namespace
}  // namespace kforge
