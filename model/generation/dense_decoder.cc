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

}  // namespace

struct DenseDecoder::Graph {
#if KFORGE_WITH_CUDA
  at::cuda::CUDAGraph graph;
#endif
  at::Tensor inputs;  // int64 [2 * rows] on the device: ids, then positions
  uint64_t last_used = 0;
};

struct DenseDecoder::Pool {
#if KFORGE_WITH_CUDA
  decltype(at::cuda::graph_pool_handle()) id = at::cuda::graph_pool_handle();
  // Recorded after each copy out of the pinned staging buffer: the next step
  // waits on it before rewriting the buffer (normally long done, since the
  // sampled tokens came back to the host in between; not after a failure).
  at::cuda::CUDAEvent staged;
#endif
  // float32 [slots, V]: every graph writes its logits here, so graphs hold
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
      decoder->staging_ = at::empty({2 * cache->shape().slots},
                                    at::TensorOptions().dtype(at::kLong).pinned_memory(true));
      decoder->pool_ = std::make_unique<Pool>();
      decoder->pool_->logits =
          at::empty({cache->shape().slots, model->config().vocab_size},
                    at::TensorOptions().dtype(at::kFloat).device(model->options().device));
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
                                             absl::Span<const int64_t> positions) {
  if (tokens.empty() || tokens.size() != positions.size() ||
      static_cast<int64_t>(tokens.size()) > cache_->shape().slots) {
    return absl::InvalidArgumentError(absl::StrCat("dense decode: ", tokens.size(), " tokens, ",
                                                   positions.size(), " positions, ",
                                                   cache_->shape().slots, " slots"));
  }
  const int64_t longest = *std::max_element(positions.begin(), positions.end());
  return use_graphs_ ? RunGraph(tokens, positions, longest)
                     : RunEager(tokens, positions, longest);
}

absl::StatusOr<at::Tensor> DenseDecoder::RunEager(absl::Span<const int64_t> tokens,
                                                  absl::Span<const int64_t> positions,
                                                  int64_t longest) {
  ++stats_.eager_steps;
  return TorchCall("dense decode step", [&] {
    c10::NoGradGuard no_grad;
    const at::Device device = model_->options().device;
    return model_->DecodeDense(cache_, Int64Tensor(tokens, device),
                               Int64Tensor(positions, device), longest + 1);
  });
}

#if KFORGE_WITH_CUDA

absl::StatusOr<at::Tensor> DenseDecoder::RunGraph(absl::Span<const int64_t> tokens,
                                                  absl::Span<const int64_t> positions,
                                                  int64_t longest) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const auto [rows, span] = GraphShape(n, longest);
  // Stage ids then positions for `rows` rows; padding rows: token 0 at 0.
  pool_->staged.synchronize();
  int64_t* staged = staging_.data_ptr<int64_t>();
  std::fill(staged, staged + 2 * rows, 0);
  std::copy(tokens.begin(), tokens.end(), staged);
  std::copy(positions.begin(), positions.end(), staged + rows);

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
      return RunEager(tokens, positions, longest);
    }
    graph = *captured;
  }
  graph->last_used = ++clock_;
  KF_RETURN_IF_ERROR(TorchCall("decode graph replay", [&] {
    const c10::cuda::CUDAGuard device_guard(model_->options().device);
    graph->inputs.copy_(staging_.narrow(0, 0, 2 * rows), /*non_blocking=*/true);
    pool_->staged.record(at::cuda::getCurrentCUDAStream(model_->options().device.index()));
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
    graph->inputs = at::empty({2 * rows}, at::TensorOptions().dtype(at::kLong).device(device));
    graph->inputs.copy_(staging_.narrow(0, 0, 2 * rows));
    const at::Tensor ids = graph->inputs.narrow(0, 0, rows);
    const at::Tensor positions = graph->inputs.narrow(0, rows, rows);
    at::cuda::getCurrentCUDAStream(device.index()).synchronize();
    {
      const c10::cuda::CUDAStreamGuard stream_guard(stream);
      // Warm-up on the capture stream: lazy initialisations (cuBLAS handles
      // and workspaces, attention kernels) must not happen inside a capture.
      // It writes the keys and values the replay then writes again.
      (void)model_->DecodeDense(cache_, ids, positions, span);
      stream.synchronize();
      graph->graph.capture_begin(pool_->id, cudaStreamCaptureModeThreadLocal);
      capturing = true;
      // The step's own output lives in the pool only during the replay.
      pool_->logits.narrow(0, 0, rows).copy_(model_->DecodeDense(cache_, ids, positions, span));
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
                                                  int64_t longest) {
  return RunEager(tokens, positions, longest);
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
