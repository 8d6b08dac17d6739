// A decode step's four GEMMs (q/k/v with bias, o_proj into the residual,
// gate/up, down_proj into the residual) as LibTorch runs them (cuBLAS's own
// choice) against every algorithm cuBLASLt's heuristic offers for the same
// shape, each replayed from a CUDA graph over `layers` distinct weights (as a
// step streams them; one weight would sit in L2). Prints microseconds per
// GEMM and the weights' read bandwidth.
//
//   kforge_linear_algos_bench --hidden 1536 --intermediate 8960 --heads 12 \
//       --kv_heads 2 --head_dim 128 --rows 16,64,256
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublasLt.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/graph_timer.h"

ABSL_FLAG(int64_t, hidden, 1536, "hidden size");
ABSL_FLAG(int64_t, intermediate, 8960, "MLP width");
ABSL_FLAG(int64_t, heads, 12, "query heads");
ABSL_FLAG(int64_t, kv_heads, 2, "key/value heads");
ABSL_FLAG(int64_t, head_dim, 128, "head dimension");
ABSL_FLAG(std::string, rows, "16,64,256", "decode rows (comma-separated)");
ABSL_FLAG(int, layers, 28, "distinct weights per GEMM");
ABSL_FLAG(int, algos, 32, "heuristic results asked for");

namespace kforge {
namespace {

#define CHECK_CUBLASLT(call)                                                    \
  do {                                                                          \
    const cublasStatus_t status_ = (call);                                      \
    TORCH_CHECK(status_ == CUBLAS_STATUS_SUCCESS, #call, " failed: ", status_); \
  } while (false)

struct Gemm {
  std::string name;
  int64_t n, k;
  bool bias, accumulate;
};

int64_t ConfigOf(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t what) {
  int64_t value = 0;
  size_t written = 0;
  uint32_t small = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, what, &small, sizeof(small), &written) ==
          CUBLAS_STATUS_SUCCESS &&
      written == sizeof(small)) {
    value = small;
  }
  return value;
}

void Run(cublasLtHandle_t handle, const Gemm& g, int64_t m, int layers, int algos) {
  const at::TensorOptions bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  std::vector<at::Tensor> weights, biases;
  for (int l = 0; l < layers; ++l) {
    weights.push_back(at::randn({g.n, g.k}, bf16) * 0.02);
    biases.push_back(at::randn({g.n}, bf16));
  }
  const at::Tensor x = at::randn({m, g.k}, bf16);
  at::Tensor y = at::zeros({m, g.n}, bf16);
  const double bytes = static_cast<double>(g.n) * g.k * 2;

  const double torch_us = GraphedMicroseconds(layers, [&](int l) {
    if (g.accumulate) {
      y.addmm_(x, weights[l].t());
    } else {
      at::Tensor out = at::linear(x, weights[l], g.bias ? biases[l] : at::Tensor());
      y.copy_(out);  // keeps the output alive like a consumer would; ~1 us
    }
  });
  // The copy above is charged to LibTorch; time it alone to take it out.
  const double copy_us =
      g.accumulate ? 0.0 : GraphedMicroseconds(layers, [&](int) { y.copy_(x.narrow(1, 0, 1)); });

  cublasLtMatmulDesc_t desc;
  CHECK_CUBLASLT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  CHECK_CUBLASLT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                                sizeof(transpose)));
  CHECK_CUBLASLT(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)));
  if (g.bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    CHECK_CUBLASLT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                  sizeof(epilogue)));
    const cudaDataType_t bias_type = CUDA_R_16BF;
    CHECK_CUBLASLT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                  &bias_type, sizeof(bias_type)));
    const void* pointer = biases[0].data_ptr();
    CHECK_CUBLASLT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer,
                                                  sizeof(pointer)));
  }
  // Row-major y[m, n] = x[m, k] w[n, k]^T is column-major y^T = w^T' x^T.
  cublasLtMatrixLayout_t a, b, c;
  CHECK_CUBLASLT(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, g.k, g.n, g.k));
  CHECK_CUBLASLT(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, g.k, m, g.k));
  CHECK_CUBLASLT(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, g.n, m, g.n));
  cublasLtMatmulPreference_t preference;
  CHECK_CUBLASLT(cublasLtMatmulPreferenceCreate(&preference));
  const size_t workspace_bytes = size_t{32} << 20;
  CHECK_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(preference,
                                                      CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace_bytes, sizeof(workspace_bytes)));
  const at::Tensor workspace =
      at::empty({static_cast<int64_t>(workspace_bytes)}, bf16.dtype(at::kByte));
  std::vector<cublasLtMatmulHeuristicResult_t> results(algos);
  int returned = 0;
  CHECK_CUBLASLT(cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, preference, algos,
                                                results.data(), &returned));
  const float alpha = 1.f, beta = g.accumulate ? 1.f : 0.f;
  double best = 1e30;
  int best_index = -1;
  std::vector<double> times(returned, -1);
  for (int i = 0; i < returned; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    try {
      times[i] = GraphedMicroseconds(layers, [&](int l) {
        if (g.bias) {
          const void* pointer = biases[l].data_ptr();
          CHECK_CUBLASLT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                        &pointer, sizeof(pointer)));
        }
        CHECK_CUBLASLT(cublasLtMatmul(handle, desc, &alpha, weights[l].data_ptr(), a, x.data_ptr(),
                                      b, &beta, y.data_ptr(), c, y.data_ptr(), c, &results[i].algo,
                                      workspace.data_ptr(), workspace_bytes,
                                      at::cuda::getCurrentCUDAStream().stream()));
      });
    } catch (const c10::Error& e) {
      std::printf("    algo %d failed: %s\n", i, e.what_without_backtrace());
      continue;
    }
    if (times[i] < best) {
      best = times[i];
      best_index = i;
    }
  }
  const double torch_gemm = torch_us - copy_us;
  std::printf(
      "%-8s m=%-4ld n=%-6ld k=%-6ld LibTorch %7.2f us (%5.0f GB/s) | heuristic #0 %7.2f us"
      " | best #%d %7.2f us (%5.0f GB/s, splitK %ld, reduction %ld, tile %ld) of %d\n",
      g.name.c_str(), static_cast<long>(m), static_cast<long>(g.n), static_cast<long>(g.k),
      torch_gemm, bytes / torch_gemm / 1e3, returned > 0 ? times[0] : -1.0, best_index, best,
      bytes / best / 1e3,
      best_index >= 0
          ? static_cast<long>(ConfigOf(results[best_index].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM))
          : -1L,
      best_index >= 0 ? static_cast<long>(ConfigOf(results[best_index].algo,
                                                   CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME))
                      : -1L,
      best_index >= 0
          ? static_cast<long>(ConfigOf(results[best_index].algo, CUBLASLT_ALGO_CONFIG_TILE_ID))
          : -1L,
      returned);
  std::printf("    all:");
  for (int i = 0; i < returned; ++i) std::printf(" %.1f", times[i]);
  std::printf("\n");
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(c);
  cublasLtMatmulDescDestroy(desc);
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t hidden = absl::GetFlag(FLAGS_hidden), dim = absl::GetFlag(FLAGS_head_dim);
  const int64_t qkv = (absl::GetFlag(FLAGS_heads) + 2 * absl::GetFlag(FLAGS_kv_heads)) * dim;
  const int64_t inter = absl::GetFlag(FLAGS_intermediate);
  const std::vector<kforge::Gemm> gemms = {
      {"qkv", qkv, hidden, true, false},
      {"o_proj", hidden, absl::GetFlag(FLAGS_heads) * dim, false, true},
      {"gate_up", 2 * inter, hidden, false, false},
      {"down", hidden, inter, false, true},
  };
  cublasLtHandle_t handle;
  if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  const std::string rows = absl::GetFlag(FLAGS_rows);
  for (absl::string_view text : absl::StrSplit(rows, ',')) {
    int64_t m = 0;
    if (!absl::SimpleAtoi(text, &m)) return 2;
    for (const kforge::Gemm& g : gemms) {
      kforge::Run(handle, g, m, absl::GetFlag(FLAGS_layers), absl::GetFlag(FLAGS_algos));
    }
  }
  cublasLtDestroy(handle);
  return 0;
}
