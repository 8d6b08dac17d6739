// Decode attention alone (issue #4), run by hand on a GPU; prints a table.
//
//   build/bin/kforge_decode_attention_bench --rows 64 --keys 1024
//
// One decode step's attention for the Qwen2.5-Coder-1.5B shape by default
// (12 query heads over 2 kv heads, head_dim 128, bfloat16): `rows` rows at
// lengths spread around `keys`, over 28 distinct per-layer caches
// [rows, kv_heads, max_len, head_dim] (so no layer's keys are still in L2),
// captured in one CUDA graph and replayed, as the decode step replays it.
// Compares kforge's FusedDecodeAttention (at the split count it picks, and
// at each of --splits) with what it replaced: kforge's Attend, that is
// LibTorch's scaled_dot_product_attention over the cache with the ragged
// additive mask. Reports us per layer and the bandwidth of the keys and
// values read.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "model/kernels/fused_kernels.h"
#include "model/transformer/attention.h"
#if KFORGE_WITH_CUDA
#include "bench/graph_timer.h"
#endif

ABSL_FLAG(int, rows, 64, "decode rows (sequences)");
ABSL_FLAG(int, keys, 1024, "mean cached length; rows spread over keys +- 64");
ABSL_FLAG(int, max_len, 2048, "tokens per cache slot");
ABSL_FLAG(int, heads, 12, "query heads");
ABSL_FLAG(int, kv_heads, 2, "key/value heads");
ABSL_FLAG(int, head_dim, 128, "head dimension");
ABSL_FLAG(int, span_bucket, 256, "keys SDPA reads are rounded up to this, as the decoder does");
ABSL_FLAG(std::string, splits, "1,2,3,4,6,8", "split counts to time besides the automatic one");

namespace kforge {
namespace {

constexpr int kLayers = 28;

#if KFORGE_WITH_CUDA

int Main() {
  const int64_t rows = absl::GetFlag(FLAGS_rows), mean = absl::GetFlag(FLAGS_keys);
  const int64_t max_len = absl::GetFlag(FLAGS_max_len), heads = absl::GetFlag(FLAGS_heads);
  const int64_t kv_heads = absl::GetFlag(FLAGS_kv_heads), dim = absl::GetFlag(FLAGS_head_dim);
  if (mean + 64 >= max_len || mean < 64) {
    std::fprintf(stderr, "--keys must be in 64..max_len - 65\n");
    return 2;
  }
  c10::NoGradGuard no_grad;
  at::manual_seed(0);
  const at::TensorOptions opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  std::vector<at::Tensor> caches;
  for (int layer = 0; layer < kLayers; ++layer) {
    caches.push_back(at::randn({2, rows, kv_heads, max_len, dim}, opts));
  }
  const at::Tensor q = at::randn({rows, heads, 1, dim}, opts);
  const at::Tensor positions =
      at::randint(mean - 64, mean + 64, {rows}, opts.dtype(at::kLong));
  const at::Tensor slots = at::arange(rows, opts.dtype(at::kLong));
  const int64_t longest = positions.max().item<int64_t>();
  const int64_t bucket = absl::GetFlag(FLAGS_span_bucket);
  const int64_t span = std::min(max_len, (longest + 1 + bucket - 1) / bucket * bucket);
  const at::Tensor mask = AdditiveMask(RaggedDecodeMask(positions, span), at::kBFloat16);
  const double bytes = static_cast<double>((positions + 1).sum().item<int64_t>()) * kv_heads *
                       dim * 2 /*bytes*/ * 2 /*keys and values*/;

  const auto sdpa = [&](int layer) {
    const at::Tensor keys = caches[layer].select(0, 0).narrow(2, 0, span);
    const at::Tensor values = caches[layer].select(0, 1).narrow(2, 0, span);
    (void)Attend(q, keys, values, AttentionMask::Explicit(mask));
  };
  const auto kforge = [&](int splits) {
    return [&, splits](int layer) {
      (void)FusedDecodeAttention(q, caches[layer].select(0, 0), caches[layer].select(0, 1),
                                 slots, positions, span, splits);
    };
  };
  // The two agree before anything is timed.
  const at::Tensor want = Attend(q, caches[0].select(0, 0).narrow(2, 0, span),
                                 caches[0].select(0, 1).narrow(2, 0, span),
                                 AttentionMask::Explicit(mask));
  const at::Tensor got = FusedDecodeAttention(q, caches[0].select(0, 0),
                                              caches[0].select(0, 1), slots, positions, span);
  std::printf("rows %lld, heads %lld/%lld, head_dim %lld, keys %lld +- 64 (span %lld), "
              "%.1f MB of keys and values per layer; max |kforge - sdpa| %.3g\n\n",
              static_cast<long long>(rows), static_cast<long long>(heads),
              static_cast<long long>(kv_heads), static_cast<long long>(dim),
              static_cast<long long>(mean), static_cast<long long>(span), bytes / 1e6,
              (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<double>());
  std::printf("%-28s %10s %10s\n", "attention", "us/layer", "GB/s");
  const auto report = [&](const std::string& name, double us) {
    std::printf("%-28s %10.2f %10.0f\n", name.c_str(), us, bytes / us / 1e3);
    std::fflush(stdout);
  };
  report("sdpa (Attend, ragged mask)", GraphedMicroseconds(kLayers, sdpa));
  report("kforge, automatic splits", GraphedMicroseconds(kLayers, kforge(0)));
  // As a decode step runs it: q and the new key rotated in the kernel, the
  // new key and value stored at each row's position.
  const at::Tensor k_new = at::randn({rows, kv_heads, 1, dim}, opts);
  const at::Tensor v_new = at::randn({rows, kv_heads, 1, dim}, opts);
  const at::Tensor inv_freq =
      1.0 / at::pow(1e6, at::arange(0, dim, 2, opts.dtype(at::kFloat)) / static_cast<double>(dim));
  report("kforge with RoPE and store", GraphedMicroseconds(kLayers, [&](int layer) {
           (void)FusedRopeDecodeAttention(q, k_new, v_new, inv_freq, caches[layer].select(0, 0),
                                          caches[layer].select(0, 1), slots, positions, span);
         }));
  for (absl::string_view piece : absl::StrSplit(absl::GetFlag(FLAGS_splits), ',')) {
    int splits = 0;
    if (!absl::SimpleAtoi(piece, &splits) || splits <= 0) continue;
    report("kforge, " + std::string(piece) + " splits",
           GraphedMicroseconds(kLayers, kforge(splits)));
  }
  return 0;
}

#else

int Main() {
  std::fprintf(stderr, "kforge_decode_attention_bench needs a CUDA build\n");
  return 2;
}

#endif  // KFORGE_WITH_CUDA

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (!kforge::FusedKernelsAvailable()) {
    std::fprintf(stderr, "this build has no kforge CUDA kernels\n");
    return 2;
  }
  return kforge::Main();
}
