#include "model/kernels/fused_kernels.h"

#include <cmath>
#include <cstdint>
#include <limits>

#if KFORGE_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "model/kernels/kernel_launchers.h"
#endif

namespace kforge {

bool FusedKernelsAvailable() { return KFORGE_WITH_CUDA_KERNELS != 0; }

bool UseFusedKernels(const at::Tensor& t) {
  return FusedKernelsAvailable() && t.defined() && t.is_cuda() && !t.requires_grad();
}

#if KFORGE_WITH_CUDA_KERNELS
namespace {

namespace ck = cuda_kernels;

ck::ElementType ElementTypeOf(const at::Tensor& t, const char* what) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return ck::ElementType::kFloat32;
    case at::kBFloat16:
      return ck::ElementType::kBFloat16;
    case at::kHalf:
      return ck::ElementType::kFloat16;
    default:
      TORCH_CHECK(false, what, ": dtype ", t.scalar_type(), " is not float32, bfloat16 or float16");
  }
}

void CheckOn(const at::Tensor& t, const at::Device& device, const char* what) {
  TORCH_CHECK(t.defined(), what, " is an undefined tensor");
  TORCH_CHECK(t.device() == device, what, " must be on ", device, ", not on ", t.device());
}

// The device of the first input, checked to be a CUDA one.
at::Device CudaDeviceOf(const at::Tensor& t, const char* op, const char* what) {
  TORCH_CHECK(t.defined(), op, ": ", what, " is an undefined tensor");
  TORCH_CHECK(t.is_cuda(), op, ": ", what, " is on ", t.device(), ", not a CUDA device");
  return t.device();
}

void CheckLaunch(cudaError_t error, const char* kernel) {
  TORCH_CHECK(error == cudaSuccess, kernel, " launch failed: ", cudaGetErrorString(error));
}

// [N, heads, 1, D] with D contiguous: the row and head strides.
void CheckTokens(const at::Tensor& t, int64_t rows, int64_t head_dim, const char* what) {
  TORCH_CHECK(t.dim() == 4 && t.size(0) == rows && t.size(2) == 1 && t.size(3) == head_dim &&
                  t.stride(3) == 1,
              what, " must be [", rows, ", heads, 1, ", head_dim,
              "] with head_dim contiguous, got sizes ", t.sizes(), " strides ", t.strides());
}

}  // namespace

at::Tensor FusedRopeStore(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& inv_freq, const at::Tensor& positions,
                          const at::Tensor& slots, const at::Tensor& keys,
                          const at::Tensor& values) {
  const at::Device device = CudaDeviceOf(q, "FusedRopeStore", "q");
  const std::pair<const at::Tensor*, const char*> inputs[] = {
      {&k, "k"},         {&v, "v"},         {&inv_freq, "inv_freq"}, {&positions, "positions"},
      {&slots, "slots"}, {&keys, "keys"}, {&values, "values"}};
  for (const auto& [t, what] : inputs) CheckOn(*t, device, what);
  const int64_t rows = q.size(0), head_dim = q.dim() == 4 ? q.size(3) : -1;
  CheckTokens(q, rows, head_dim, "q");
  CheckTokens(k, rows, head_dim, "k");
  CheckTokens(v, rows, head_dim, "v");
  const int64_t kv_heads = k.size(1);
  TORCH_CHECK(v.size(1) == kv_heads && head_dim % 2 == 0, "k and v must have the same heads and ",
              "head_dim must be even, got ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                  keys.scalar_type() == q.scalar_type() && values.scalar_type() == q.scalar_type(),
              "q, k, v and the cache must share one dtype");
  TORCH_CHECK(inv_freq.scalar_type() == at::kFloat && inv_freq.is_contiguous() &&
                  inv_freq.numel() == head_dim / 2,
              "inv_freq must be contiguous float32 [", head_dim / 2, "], got ",
              inv_freq.scalar_type(), " ", inv_freq.sizes());
  for (const at::Tensor* index : {&positions, &slots}) {
    TORCH_CHECK(index->scalar_type() == at::kLong && index->is_contiguous() &&
                    index->dim() == 1 && index->size(0) == rows,
                "positions and slots must be contiguous int64 [", rows, "]");
  }
  TORCH_CHECK(keys.dim() == 4 && keys.sizes() == values.sizes() &&
                  keys.strides() == values.strides() && keys.size(1) == kv_heads &&
                  keys.size(3) == head_dim && keys.stride(3) == 1,
              "keys and values must be one layout [slots, ", kv_heads, ", max_len, ", head_dim,
              "], got ", keys.sizes(), " and ", values.sizes());
  const c10::cuda::CUDAGuard guard(device);
  at::Tensor q_out = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
  ck::RopeStoreArgs args;
  args.type = ElementTypeOf(q, "FusedRopeStore");
  args.rows = static_cast<int>(rows);
  args.heads = static_cast<int>(q.size(1));
  args.kv_heads = static_cast<int>(kv_heads);
  args.head_dim = static_cast<int>(head_dim);
  args.q = q.data_ptr();
  args.q_row = q.stride(0);
  args.q_head = q.stride(1);
  args.k = k.data_ptr();
  args.k_row = k.stride(0);
  args.k_head = k.stride(1);
  args.v = v.data_ptr();
  args.v_row = v.stride(0);
  args.v_head = v.stride(1);
  args.inv_freq = inv_freq.data_ptr<float>();
  args.positions = positions.data_ptr<int64_t>();
  args.slots = slots.data_ptr<int64_t>();
  args.q_out = q_out.data_ptr();
  args.keys = keys.data_ptr();
  args.values = values.data_ptr();
  args.cache_slot = keys.stride(0);
  args.cache_head = keys.stride(1);
  args.cache_pos = keys.stride(2);
  CheckLaunch(ck::LaunchRopeStore(args, at::cuda::getCurrentCUDAStream(device.index())),
              "FusedRopeStore");
  return q_out;
}

bool FusedDecodeAttentionTakes(at::ScalarType dtype, const at::Device& device, int64_t heads,
                               int64_t kv_heads, int64_t head_dim) {
  if (!device.is_cuda() || (dtype != at::kBFloat16 && dtype != at::kHalf)) return false;
  return ck::DecodeAttentionSupports(
      dtype == at::kHalf ? ck::ElementType::kFloat16 : ck::ElementType::kBFloat16,
      static_cast<int>(heads), static_cast<int>(kv_heads), static_cast<int>(head_dim));
}

bool FusedDecodeAttentionSupports(const at::Tensor& q, const at::Tensor& keys) {
  if (!UseFusedKernels(q) || q.dim() != 4 || keys.dim() != 4) return false;
  return FusedDecodeAttentionTakes(q.scalar_type(), q.device(), q.size(1), keys.size(1),
                                   q.size(3));
}

namespace {

// The new token's key and value and the RoPE frequencies, for
// FusedRopeDecodeAttention.
struct NewTokenKv {
  const at::Tensor& k;
  const at::Tensor& v;
  const at::Tensor& inv_freq;
};

at::Tensor DecodeAttention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                           const at::Tensor& slots, const at::Tensor& positions, int64_t max_keys,
                           int splits, const NewTokenKv* new_kv) {
  const at::Device device = CudaDeviceOf(q, "FusedDecodeAttention", "q");
  const std::pair<const at::Tensor*, const char*> inputs[] = {
      {&keys, "keys"}, {&values, "values"}, {&slots, "slots"}, {&positions, "positions"}};
  for (const auto& [t, what] : inputs) CheckOn(*t, device, what);
  TORCH_CHECK(FusedDecodeAttentionSupports(q, keys), "FusedDecodeAttention does not take q ",
              q.sizes(), " ", q.scalar_type(), " over keys ", keys.sizes(),
              " (bfloat16 or float16, head_dim 64 or 128, at most 16 query heads per kv head)");
  const int64_t rows = q.size(0), heads = q.size(1), head_dim = q.size(3);
  CheckTokens(q, rows, head_dim, "q");
  TORCH_CHECK(q.stride(0) % 2 == 0 && q.stride(1) % 2 == 0 &&
                  reinterpret_cast<uintptr_t>(q.data_ptr()) % 4 == 0,
              "q must be 4-byte aligned with even row and head strides (pairs are read as one "
              "word)");
  TORCH_CHECK(keys.scalar_type() == q.scalar_type() && values.scalar_type() == q.scalar_type(),
              "q and the cache must share one dtype");
  TORCH_CHECK(keys.sizes() == values.sizes() && keys.strides() == values.strides() &&
                  keys.size(3) == head_dim && keys.stride(3) == 1,
              "keys and values must be one layout [slots, kv_heads, max_len, ", head_dim,
              "], got ", keys.sizes(), " and ", values.sizes());
  // Rows of keys are copied 16 bytes at a time.
  const auto aligned = [](const at::Tensor& t) {
    return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0 && t.stride(0) % 8 == 0 &&
           t.stride(1) % 8 == 0 && t.stride(2) % 8 == 0;
  };
  TORCH_CHECK(aligned(keys) && aligned(values),
              "the cache must be 16-byte aligned with strides that are multiples of 8");
  for (const at::Tensor* index : {&positions, &slots}) {
    TORCH_CHECK(index->scalar_type() == at::kLong && index->is_contiguous() &&
                    index->dim() == 1 && index->size(0) == rows,
                "positions and slots must be contiguous int64 [", rows, "]");
  }
  TORCH_CHECK(max_keys >= 1 && max_keys <= keys.size(2), "max_keys ", max_keys,
              " must be in 1..", keys.size(2));
  const c10::cuda::CUDAGuard guard(device);
  at::Tensor out = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
  ck::DecodeAttentionArgs args;
  args.type = ElementTypeOf(q, "FusedDecodeAttention");
  args.rows = static_cast<int>(rows);
  args.heads = static_cast<int>(heads);
  args.kv_heads = static_cast<int>(keys.size(1));
  args.head_dim = static_cast<int>(head_dim);
  const int multiprocessors = at::cuda::getDeviceProperties(device.index())->multiProcessorCount;
  args.splits = splits > 0 ? splits : ck::DecodeAttentionSplits(args, max_keys, multiprocessors);
  at::Tensor partial_out, partial_lse;
  if (args.splits > 1) {
    partial_out = at::empty({rows, heads, args.splits, head_dim}, q.options().dtype(at::kFloat));
    partial_lse = at::empty({rows, heads, args.splits}, q.options().dtype(at::kFloat));
    args.partial_out = partial_out.data_ptr<float>();
    args.partial_lse = partial_lse.data_ptr<float>();
  }
  args.q = q.data_ptr();
  args.q_row = q.stride(0);
  args.q_head = q.stride(1);
  args.keys = keys.data_ptr();
  args.values = values.data_ptr();
  args.cache_slot = keys.stride(0);
  args.cache_head = keys.stride(1);
  args.cache_pos = keys.stride(2);
  args.slots = slots.data_ptr<int64_t>();
  args.positions = positions.data_ptr<int64_t>();
  args.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  args.out = out.data_ptr();
  if (new_kv != nullptr) {
    CheckOn(new_kv->k, device, "k");
    CheckOn(new_kv->v, device, "v");
    CheckOn(new_kv->inv_freq, device, "inv_freq");
    CheckTokens(new_kv->k, rows, head_dim, "k");
    CheckTokens(new_kv->v, rows, head_dim, "v");
    TORCH_CHECK(new_kv->k.size(1) == keys.size(1) && new_kv->v.size(1) == keys.size(1) &&
                    new_kv->k.scalar_type() == q.scalar_type() &&
                    new_kv->v.scalar_type() == q.scalar_type(),
                "k and v must be [", rows, ", ", keys.size(1), ", 1, ", head_dim,
                "] of q's dtype, got ", new_kv->k.sizes(), " and ", new_kv->v.sizes());
    const at::Tensor& inv_freq = new_kv->inv_freq;
    TORCH_CHECK(inv_freq.scalar_type() == at::kFloat && inv_freq.is_contiguous() &&
                    inv_freq.numel() == head_dim / 2,
                "inv_freq must be contiguous float32 [", head_dim / 2, "], got ",
                inv_freq.scalar_type(), " ", inv_freq.sizes());
    args.inv_freq = inv_freq.data_ptr<float>();
    args.k = new_kv->k.data_ptr();
    args.k_row = new_kv->k.stride(0);
    args.k_head = new_kv->k.stride(1);
    args.v = new_kv->v.data_ptr();
    args.v_row = new_kv->v.stride(0);
    args.v_head = new_kv->v.stride(1);
  }
  CheckLaunch(ck::LaunchDecodeAttention(args, at::cuda::getCurrentCUDAStream(device.index())),
              "FusedDecodeAttention");
  return out;
}

}  // namespace

at::Tensor FusedDecodeAttention(const at::Tensor& q, const at::Tensor& keys,
                                const at::Tensor& values, const at::Tensor& slots,
                                const at::Tensor& positions, int64_t max_keys, int splits) {
  return DecodeAttention(q, keys, values, slots, positions, max_keys, splits, nullptr);
}

at::Tensor FusedRopeDecodeAttention(const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v, const at::Tensor& inv_freq,
                                    const at::Tensor& keys, const at::Tensor& values,
                                    const at::Tensor& slots, const at::Tensor& positions,
                                    int64_t max_keys) {
  const NewTokenKv new_kv{k, v, inv_freq};
  return DecodeAttention(q, keys, values, slots, positions, max_keys, 0, &new_kv);
}

namespace {

// [rows, C] over x's leading dims without a copy; undefined when they do not
// nest (each stride the next's times its size) or C is not contiguous.
at::Tensor RowsOf(const at::Tensor& x) {
  if (x.dim() < 1 || x.stride(-1) != 1) return at::Tensor();
  int64_t inner_stride = -1, inner_size = 1;
  for (int64_t d = x.dim() - 2; d >= 0; --d) {
    if (x.size(d) == 1) continue;
    if (inner_stride >= 0 && x.stride(d) != inner_stride * inner_size) return at::Tensor();
    inner_stride = x.stride(d);
    inner_size = x.size(d);
  }
  return x.view({-1, x.size(-1)});
}

}  // namespace

bool FusedRmsNormSupports(const at::Tensor& x, const at::Tensor& weight) {
  return UseFusedKernels(x) && weight.defined() && !weight.requires_grad() &&
         weight.device() == x.device() && weight.scalar_type() == x.scalar_type() &&
         weight.dim() == 1 && weight.is_contiguous() && x.dim() >= 1 &&
         weight.size(0) == x.size(-1) && x.numel() > 0 && RowsOf(x).defined();
}

at::Tensor FusedRmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(FusedRmsNormSupports(x, weight), "FusedRmsNorm does not take x ", x.sizes(), " ",
              x.scalar_type(), " strides ", x.strides(), " with weight ", weight.sizes(), " ",
              weight.scalar_type(), " (CUDA, one dtype, weight [C] contiguous, rows of x "
              "evenly strided)");
  const at::Tensor rows = RowsOf(x);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  ck::RmsNormArgs args;
  args.type = ElementTypeOf(x, "FusedRmsNorm");
  args.rows = rows.size(0);
  args.width = rows.size(1);
  args.x = rows.data_ptr();
  args.x_row = rows.stride(0);
  args.weight = weight.data_ptr();
  args.eps = static_cast<float>(eps);
  args.out = out.data_ptr();
  CheckLaunch(ck::LaunchRmsNorm(args, at::cuda::getCurrentCUDAStream(x.device().index())),
              "FusedRmsNorm");
  return out;
}

at::Tensor FusedSiluMul(const at::Tensor& gate, const at::Tensor& up) {
  CheckOn(up, CudaDeviceOf(gate, "FusedSiluMul", "gate"), "up");
  TORCH_CHECK(gate.sizes() == up.sizes() && gate.scalar_type() == up.scalar_type() &&
                  gate.dim() >= 1,
              "gate and up must share shape and dtype, got ", gate.sizes(), " ",
              gate.scalar_type(), " and ", up.sizes(), " ", up.scalar_type());
  const int64_t width = gate.size(-1);
  // Rows evenly strided with the last dim contiguous: a 2-d view without a copy.
  const at::Tensor gate_rows = gate.reshape({-1, width});
  const at::Tensor up_rows = up.reshape({-1, width});
  TORCH_CHECK(gate_rows.stride(1) == 1 && up_rows.stride(1) == 1,
              "gate and up must have their last dim contiguous");
  const c10::cuda::CUDAGuard guard(gate.device());
  at::Tensor out =
      at::empty(gate.sizes(), gate.options().memory_format(at::MemoryFormat::Contiguous));
  ck::SiluMulArgs args;
  args.type = ElementTypeOf(gate, "FusedSiluMul");
  args.rows = gate_rows.size(0);
  args.width = width;
  args.gate = gate_rows.data_ptr();
  args.gate_row = gate_rows.stride(0);
  args.up = up_rows.data_ptr();
  args.up_row = up_rows.stride(0);
  args.out = out.data_ptr();
  CheckLaunch(ck::LaunchSiluMul(args, at::cuda::getCurrentCUDAStream(gate.device().index())),
              "FusedSiluMul");
  return out;
}

FusedDraws FusedTemperedSample(const at::Tensor& logits, const at::Tensor& temperature,
                               const at::Tensor& uniform) {
  const at::Device device = CudaDeviceOf(logits, "FusedTemperedSample", "logits");
  CheckOn(temperature, device, "temperature");
  CheckOn(uniform, device, "uniform");
  TORCH_CHECK(logits.dim() == 2 && logits.size(0) >= 1 && logits.size(1) >= 1 &&
                  logits.stride(1) == 1,
              "logits must be [B, V] with V contiguous, got ", logits.sizes(), " strides ",
              logits.strides());
  const int64_t rows = logits.size(0);
  TORCH_CHECK(rows <= std::numeric_limits<int>::max() && logits.size(1) <= (int64_t{1} << 28),
              "FusedTemperedSample takes at most 2^31 - 1 rows and 2^28 tokens, got ",
              logits.sizes());
  for (const at::Tensor* column : {&temperature, &uniform}) {
    TORCH_CHECK(column->scalar_type() == at::kDouble && column->dim() == 1 &&
                    column->size(0) == rows,
                "temperature and uniform must be float64 [", rows, "], got ",
                column->scalar_type(), " ", column->sizes());
  }
  const c10::cuda::CUDAGuard guard(logits.device());
  FusedDraws draws;
  draws.tokens = at::empty({rows}, logits.options().dtype(at::kLong));
  draws.logprobs = at::empty({rows}, logits.options().dtype(at::kFloat));
  const at::Tensor partials = at::empty({ck::TemperedSamplePartialFloats(rows, logits.size(1))},
                                        logits.options().dtype(at::kFloat));
  ck::TemperedSampleArgs args;
  args.type = ElementTypeOf(logits, "FusedTemperedSample: logits");
  args.rows = rows;
  args.vocab = logits.size(1);
  args.logits = logits.data_ptr();
  args.logits_row = logits.stride(0);
  args.temperature = temperature.data_ptr<double>();
  args.temperature_stride = temperature.stride(0);
  args.uniform = uniform.data_ptr<double>();
  args.uniform_stride = uniform.stride(0);
  args.partials = partials.data_ptr<float>();
  args.tokens = draws.tokens.data_ptr<int64_t>();
  args.logprobs = draws.logprobs.data_ptr<float>();
  CheckLaunch(
      ck::LaunchTemperedSample(args, at::cuda::getCurrentCUDAStream(logits.device().index())),
      "FusedTemperedSample");
  return draws;
}

#else  // !KFORGE_WITH_CUDA_KERNELS

namespace {
[[noreturn]] void NotBuilt(const char* what) {
  TORCH_CHECK(false, what,
              ": this build has no kforge CUDA kernels (they need a CUDA LibTorch and nvcc; "
              "see KFORGE_CUDA_KERNELS in CMakeLists.txt)");
}
}  // namespace

at::Tensor FusedRopeStore(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                          const at::Tensor&, const at::Tensor&, const at::Tensor&,
                          const at::Tensor&, const at::Tensor&) {
  NotBuilt("FusedRopeStore");
}
bool FusedDecodeAttentionSupports(const at::Tensor&, const at::Tensor&) { return false; }
bool FusedDecodeAttentionTakes(at::ScalarType, const at::Device&, int64_t, int64_t, int64_t) {
  return false;
}
bool FusedRmsNormSupports(const at::Tensor&, const at::Tensor&) { return false; }
at::Tensor FusedRmsNorm(const at::Tensor&, const at::Tensor&, double) {
  NotBuilt("FusedRmsNorm");
}
at::Tensor FusedDecodeAttention(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                const at::Tensor&, const at::Tensor&, int64_t, int) {
  NotBuilt("FusedDecodeAttention");
}
at::Tensor FusedRopeDecodeAttention(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                    const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                    const at::Tensor&, const at::Tensor&, int64_t) {
  NotBuilt("FusedRopeDecodeAttention");
}
at::Tensor FusedSiluMul(const at::Tensor&, const at::Tensor&) { NotBuilt("FusedSiluMul"); }
FusedDraws FusedTemperedSample(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  NotBuilt("FusedTemperedSample");
}

#endif  // KFORGE_WITH_CUDA_KERNELS

}  // namespace kforge
