#include "model/generation/dense_decoder.h"

#include <algorithm>
#include <limits>
#include <utility>

#include <c10/core/GradMode.h>
#if KFORGE_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/int64_tensor.h"
#include "model/transformer/kv_cache.h"
#include "model/transformer/torch_status.h"

namespace kforge {
namespace {

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// True when row i takes ids[i] for every i: the generator's steady state.
bool InOrder(absl::Span<const int64_t> rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Rows of `ids` ([n], on the device) that name a device token take it:
// one copy in the steady state, else a gather and a select over `sources`
// (device.rows as a device tensor). Device work only, no host wait.
void TakeDeviceTokens(const at::Tensor& ids, const DenseDecoder::DeviceTokens& device,
                      const at::Tensor& sources) {
  const int64_t n = ids.size(0);
  if (InOrder(device.rows)) {
    ids.copy_(device.ids.narrow(0, 0, n));
    return;
  }
  ids.copy_(at::where(sources >= 0, device.ids.index_select(0, sources.clamp_min(0)), ids));
}

}  // namespace

struct DenseDecoder::Graph {
#if KFORGE_WITH_CUDA
  at::cuda::CUDAGraph graph;
#endif
  // int64 [3 * rows] on the device: ids and positions (what the graph
  // reads), then the rows' device-token sources (what TakeDeviceTokens reads).
  at::Tensor inputs;
  uint64_t last_used = 0;
};

struct DenseDecoder::Pool {
#if KFORGE_WITH_CUDA
  decltype(at::cuda::graph_pool_handle()) id = at::cuda::graph_pool_handle();
  // Recorded after each copy out of the pinned staging buffer: the next step
  // waits on it before rewriting the buffer (normally done: the generator
  // has since waited for the tokens of the step queued before that copy).
  at::cuda::CUDAEvent staged;
#endif
  // [slots, V] in the model's dtype: every graph writes its logits here, so graphs hold
  // no output memory of their own.
  at::Tensor logits;
};

absl::StatusOr<std::unique_ptr<DenseDecoder>> DenseDecoder::Create(
    const DecoderModel* model, KvCache* cache, const DenseDecoderOptions& options) {
  if (options.span_bucket <= 0 || options.max_graphs <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dense decoder: span_bucket (", options.span_bucket, ") and max_graphs (",
        options.max_graphs, ") must be positive"));
  }
  bool use_graphs = false;
#if KFORGE_WITH_CUDA
  use_graphs = options.cuda_graphs && model->options().device.is_cuda();
#endif
  auto decoder =
      std::unique_ptr<DenseDecoder>(new DenseDecoder(model, cache, options, use_graphs));
  if (use_graphs) {
    KF_RETURN_IF_ERROR(TorchCall("dense decoder staging buffer", [&] {
      decoder->staging_ = at::empty({3 * cache->shape().slots},
                                    at::TensorOptions().dtype(at::kLong).pinned_memory(true));
      decoder->pool_ = std::make_unique<Pool>();
      decoder->pool_->logits =
          at::empty({cache->shape().slots, model->config().vocab_size},
                    at::TensorOptions()
                        .dtype(model->options().dtype)
                        .device(model->options().device));
      return absl::OkStatus();
    }));
  } else if (!options.cuda_graphs) {
    decoder->stats_.graphs_off = "turned off by option";
  } else {
    decoder->stats_.graphs_off = "not a CUDA device";
  }
  return decoder;
}

DenseDecoder::DenseDecoder(const DecoderModel* model, KvCache* cache,
                           const DenseDecoderOptions& options, bool use_graphs)
    : model_(model), cache_(cache), options_(options), use_graphs_(use_graphs) {}

DenseDecoder::~DenseDecoder() {
  // Graphs go before the pool handle they were captured into.
  graphs_.clear();
}

std::pair<int64_t, int64_t> DenseDecoder::GraphShape(int64_t n, int64_t longest) const {
  int64_t rows = 1;
  while (rows < n && rows < 8) rows *= 2;
  if (rows < n) rows = RoundUp(n, 16);
  rows = std::min(rows, cache_->shape().slots);
  const int64_t span =
      std::min(RoundUp(longest + 1, options_.span_bucket), cache_->shape().max_len);
  return {rows, span};
}

absl::StatusOr<at::Tensor> DenseDecoder::Run(absl::Span<const int64_t> tokens,
                                             absl::Span<const int64_t> positions,
                                             const DeviceTokens* device) {
  if (tokens.empty() || tokens.size() != positions.size() ||
      static_cast<int64_t>(tokens.size()) > cache_->shape().slots) {
    return absl::InvalidArgumentError(absl::StrCat("dense decode: ", tokens.size(), " tokens, ",
                                                   positions.size(), " positions, ",
                                                   cache_->shape().slots, " slots"));
  }
  if (device != nullptr && device->rows.size() != tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("dense decode: ", device->rows.size(),
                                                   " device-token rows for ", tokens.size(),
                                                   " tokens"));
  }
  if (device != nullptr &&
      std::all_of(device->rows.begin(), device->rows.end(), [](int64_t r) { return r < 0; })) {
    device = nullptr;  // every token from the host
  }
  if (device != nullptr) {
    const at::Tensor& ids = device->ids;
    const at::Device& model_device = model_->options().device;
    if (!ids.defined() || ids.dim() != 1 || ids.scalar_type() != at::kLong ||
        ids.device().type() != model_device.type() ||
        (model_device.has_index() && ids.device().index() != model_device.index())) {
      return absl::InvalidArgumentError(
          "dense decode: device tokens need int64 ids [m] on the model's device");
    }
    for (int64_t row : device->rows) {
      if (row < -1 || row >= ids.size(0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dense decode: device token row ", row, " outside [-1, ", ids.size(0), ")"));
      }
    }
  }
  const int64_t longest = *std::max_element(positions.begin(), positions.end());
  return use_graphs_ ? RunGraph(tokens, positions, longest, device)
                     : RunEager(tokens, positions, longest, device);
}

absl::StatusOr<at::Tensor> DenseDecoder::RunEager(absl::Span<const int64_t> tokens,
                                                  absl::Span<const int64_t> positions,
                                                  int64_t longest, const DeviceTokens* device) {
  ++stats_.eager_steps;
  return TorchCall("dense decode step", [&] {
    c10::NoGradGuard no_grad;
    const at::Device on = model_->options().device;
    at::Tensor ids = Int64Tensor(tokens, on);
    if (device != nullptr) {
      TakeDeviceTokens(ids, *device,
                       InOrder(device->rows) ? at::Tensor() : Int64Tensor(device->rows, on));
    }
    return model_->DecodeDense(cache_, ids, Int64Tensor(positions, on), longest + 1);
  });
}

#if KFORGE_WITH_CUDA

absl::StatusOr<at::Tensor> DenseDecoder::RunGraph(absl::Span<const int64_t> tokens,
                                                  absl::Span<const int64_t> positions,
                                                  int64_t longest, const DeviceTokens* device) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const auto [rows, span] = GraphShape(n, longest);
  // Stage ids, positions and device-token sources for `rows` rows; padding
  // rows: token 0 at 0.
  pool_->staged.synchronize();
  int64_t* staged = staging_.data_ptr<int64_t>();
  std::fill(staged, staged + 3 * rows, 0);
  std::copy(tokens.begin(), tokens.end(), staged);
  std::copy(positions.begin(), positions.end(), staged + rows);
  if (device != nullptr) std::copy(device->rows.begin(), device->rows.end(), staged + 2 * rows);

  Graph* graph = nullptr;
  if (auto it = graphs_.find({rows, span}); it != graphs_.end()) {
    graph = it->second.get();
  } else {
    absl::StatusOr<Graph*> captured = Capture(rows, span);
    if (!captured.ok()) {
      // Capture is an optimisation: run this and every later step eagerly.
      use_graphs_ = false;
      stats_.graphs_off = std::string(captured.status().message());
      graphs_.clear();
      stats_.graphs = 0;
      return RunEager(tokens, positions, longest, device);
    }
    graph = *captured;
  }
  graph->last_used = ++clock_;
  KF_RETURN_IF_ERROR(TorchCall("decode graph replay", [&] {
    const c10::cuda::CUDAGuard device_guard(model_->options().device);
    graph->inputs.copy_(staging_.narrow(0, 0, 3 * rows), /*non_blocking=*/true);
    pool_->staged.record(at::cuda::getCurrentCUDAStream(model_->options().device.index()));
    // Queued behind the step that sampled device->ids, outside the graph.
    if (device != nullptr) {
      TakeDeviceTokens(graph->inputs.narrow(0, 0, n), *device,
                       graph->inputs.narrow(0, 2 * rows, n));
    }
    graph->graph.replay();
    return absl::OkStatus();
  }));
  ++stats_.replays;
  return pool_->logits.narrow(0, 0, n);
}

absl::StatusOr<DenseDecoder::Graph*> DenseDecoder::Capture(int64_t rows, int64_t span) {
  auto graph = std::make_unique<Graph>();
  const at::Device device = model_->options().device;
  const c10::cuda::CUDAGuard device_guard(device);
  at::cuda::CUDAStream stream = at::cuda::getStreamFromPool(false, device.index());
  bool capturing = false;
  try {
    c10::NoGradGuard no_grad;
    graph->inputs = at::empty({3 * rows}, at::TensorOptions().dtype(at::kLong).device(device));
    graph->inputs.copy_(staging_.narrow(0, 0, 3 * rows));
    const at::Tensor ids = graph->inputs.narrow(0, 0, rows);
    const at::Tensor positions = graph->inputs.narrow(0, rows, rows);
    at::cuda::getCurrentCUDAStream(device.index()).synchronize();
    {
      const c10::cuda::CUDAStreamGuard stream_guard(stream);
      // Warm-up on the capture stream: lazy initialisations (cuBLAS handles
      // and workspaces, attention kernels) must not happen inside a capture.
      // It writes keys and values where the replay then writes again (with
      // the device tokens, which only the replay takes).
      (void)model_->DecodeDense(cache_, ids, positions, span);
      stream.synchronize();
      graph->graph.capture_begin(pool_->id, cudaStreamCaptureModeThreadLocal);
      capturing = true;
      // The step's own output lives in the pool only during the replay: the
      // lm_head GEMM writes the shared buffer directly.
      (void)model_->DecodeDense(cache_, ids, positions, span, pool_->logits.narrow(0, 0, rows));
      graph->graph.capture_end();
      capturing = false;
    }
    stream.synchronize();
  } catch (const c10::Error& error) {
    if (capturing) {
      // Leave the stream out of capture mode so later work on it can run.
      cudaGraph_t partial = nullptr;
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(stream.stream(), &status) == cudaSuccess &&
          status != cudaStreamCaptureStatusNone &&
          cudaStreamEndCapture(stream.stream(), &partial) == cudaSuccess && partial != nullptr) {
        cudaGraphDestroy(partial);
      }
      (void)cudaGetLastError();
      // capture_begin routed this stream's allocations to the pool and only
      // capture_end (which threw) undoes that: undo it here, and give back
      // the pool use it took, or the allocator keeps a filter naming a
      // destroyed graph.
      try {
        c10::cuda::CUDACachingAllocator::endAllocateToPool(device.index(), pool_->id);
        c10::cuda::CUDACachingAllocator::releasePool(device.index(), pool_->id);
      } catch (const c10::Error&) {
        // capture_end got as far as ending the pool's recording itself.
      }
    }
    return absl::InternalError(absl::StrCat("capturing the decode step of ", rows, " rows x ",
                                            span, " keys as a CUDA graph: ",
                                            error.what_without_backtrace()));
  }
  ++stats_.captures;
  Graph* raw = graph.get();
  raw->last_used = ++clock_;
  graphs_[{rows, span}] = std::move(graph);
  // Evicted only now: a pool whose last graph is gone cannot take a new
  // capture (PyTorch asserts its use count is positive).
  while (static_cast<int64_t>(graphs_.size()) > options_.max_graphs) EvictLeastRecentlyUsed();
  stats_.graphs = static_cast<int64_t>(graphs_.size());
  return raw;
}

#else  // !KFORGE_WITH_CUDA

absl::StatusOr<at::Tensor> DenseDecoder::RunGraph(absl::Span<const int64_t> tokens,
                                                  absl::Span<const int64_t> positions,
                                                  int64_t longest, const DeviceTokens* device) {
  return RunEager(tokens, positions, longest, device);
}

absl::StatusOr<DenseDecoder::Graph*> DenseDecoder::Capture(int64_t, int64_t) {
  return absl::FailedPreconditionError("CUDA graphs need a LibTorch built with CUDA");
}

#endif  // KFORGE_WITH_CUDA

void DenseDecoder::EvictLeastRecentlyUsed() {
  auto oldest = graphs_.end();
  uint64_t oldest_use = std::numeric_limits<uint64_t>::max();
  for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
    if (it->second->last_used < oldest_use) {
      oldest_use = it->second->last_used;
      oldest = it;
    }
  }
  if (oldest != graphs_.end()) graphs_.erase(oldest);
  stats_.graphs = static_cast<int64_t>(graphs_.size());
}

}  // namespace kforge
