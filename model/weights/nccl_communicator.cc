#include "model/weights/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "model/weights/flat_parameters.h"

#if KFORGE_WITH_NCCL
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nccl.h>

#include "model/transformer/torch_status.h"
#endif

namespace kforge {

#if KFORGE_WITH_NCCL

namespace {

// How long a wait sleeps between looks at the communicator and the stream:
// finely for the first milliseconds (a model's broadcast takes a few, and
// the benchmark measures it), then coarsely, so a wait that runs into its
// deadline does not spin a core for it.
absl::Duration PollInterval(absl::Time started) {
  return absl::Now() - started < absl::Milliseconds(50) ? absl::Microseconds(20)
                                                       : absl::Milliseconds(1);
}

absl::Status NcclStatus(absl::string_view what, ncclResult_t result, ncclComm_t comm) {
  const char* detail = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  const std::string message =
      absl::StrCat(what, ": NCCL ", ncclGetErrorString(result),
                   detail != nullptr && *detail != '\0' ? absl::StrCat(" (", detail, ")") : "");
  switch (result) {
    case ncclInvalidArgument:
      return absl::InvalidArgumentError(message);
    case ncclInvalidUsage:
      return absl::FailedPreconditionError(message);
    case ncclInternalError:
      return absl::InternalError(message);
    default:  // system and remote errors: a peer or the link failed
      return absl::UnavailableError(message);
  }
}

// Polls a non-blocking communicator until `done(state)` holds (state: its
// async status), failing on an NCCL error, at the deadline, or when
// `cancelled` (may be null) says so.
absl::Status PollComm(ncclComm_t comm, absl::Time deadline, absl::string_view what,
                      const std::function<bool()>& cancelled,
                      const std::function<bool(ncclResult_t)>& done) {
  const absl::Time started = absl::Now();
  while (true) {
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t r = ncclCommGetAsyncError(comm, &state); r != ncclSuccess) {
      return NcclStatus(what, r, comm);
    }
    if (done(state)) return absl::OkStatus();
    if (state != ncclSuccess && state != ncclInProgress) return NcclStatus(what, state, comm);
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": not done by its deadline"));
    }
    if (cancelled && cancelled()) return absl::CancelledError(absl::StrCat(what, ": cancelled"));
    absl::SleepFor(PollInterval(started));
  }
}

// Waits until the communicator has finished its last call (an
// initialisation, or the enqueueing of a collective).
absl::Status WaitIdle(ncclComm_t comm, absl::Time deadline, absl::string_view what,
                      const std::function<bool()>& cancelled) {
  return PollComm(comm, deadline, what, cancelled,
                  [](ncclResult_t state) { return state == ncclSuccess; });
}

}  // namespace

// The communicator and a stream of its own: not one of LibTorch's pooled
// streams, which CUDA-graph capture and other code also draw from.
struct NcclCommunicator::Handle {
  ncclComm_t comm = nullptr;
  cudaStream_t raw_stream = nullptr;
  std::optional<c10::cuda::CUDAStream> stream;
  int device_index = -1;

  ~Handle() {
    if (comm != nullptr) ncclCommAbort(comm);
    if (raw_stream != nullptr) {
      c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_index));
      cudaStreamSynchronize(raw_stream);
      cudaStreamDestroy(raw_stream);
    }
  }
};

bool NcclCommunicator::Available() { return true; }

std::string NcclCommunicator::DeviceUuid(int device_index) {
  if (device_index < 0) return "";
  const cudaDeviceProp* properties =
      at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device_index));
  std::string hex;
  for (char byte : properties->uuid.bytes) {
    absl::StrAppend(&hex, absl::Hex(static_cast<unsigned char>(byte), absl::kZeroPad2));
  }
  return hex;
}

absl::StatusOr<std::string> NcclCommunicator::NewUniqueId() {
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
    return NcclStatus("ncclGetUniqueId", r, nullptr);
  }
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Join(
    const std::string& unique_id, int rank, int world_size, int device_index,
    absl::Duration timeout, const std::function<bool()>& cancelled) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL unique id: ", unique_id.size(),
                                                   " bytes, not ", sizeof(id.internal)));
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL group: rank ", rank, " is not within a group of ", world_size));
  }
  if (device_index < 0) {
    return absl::InvalidArgumentError("NCCL group: the parameters are not on a CUDA device");
  }
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  const absl::Time deadline = absl::Now() + timeout;
  const std::string what = absl::StrCat("joining an NCCL group as rank ", rank, " of ", world_size);
  auto handle = std::make_unique<Handle>();
  handle->device_index = device_index;
  absl::Status joined = TorchCall(what, [&]() -> absl::Status {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_index));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&handle->comm, world_size, id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) return NcclStatus(what, r, handle->comm);
    if (absl::Status s = WaitIdle(handle->comm, deadline, what, cancelled); !s.ok()) {
      if (absl::IsDeadlineExceeded(s)) {
        return absl::DeadlineExceededError(absl::StrCat(
            what, ": the group did not form within ", absl::FormatDuration(timeout),
            " (a member never joined)"));
      }
      return s;
    }
    if (cudaError_t e = cudaStreamCreateWithFlags(&handle->raw_stream, cudaStreamNonBlocking);
        e != cudaSuccess) {
      return absl::ResourceExhaustedError(
          absl::StrCat(what, ": cannot create a stream: ", cudaGetErrorString(e)));
    }
    handle->stream = c10::cuda::getStreamFromExternal(handle->raw_stream,
                                                      static_cast<c10::DeviceIndex>(device_index));
    return absl::OkStatus();
  });
  if (!joined.ok()) return joined;  // the handle aborts what was started
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(std::move(handle), rank, world_size, device_index));
}

NcclCommunicator::~NcclCommunicator() = default;  // the handle aborts

absl::Status NcclCommunicator::BroadcastSpans(const std::vector<std::pair<void*, int64_t>>& spans,
                                              int root, int64_t bucket_bytes,
                                              absl::Duration timeout) {
  if (broken_) return absl::FailedPreconditionError("the NCCL group was aborted; it must re-form");
  if (root < 0 || root >= world_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast root ", root, " is not within a group of ", world_size_));
  }
  if (bucket_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("bucket_bytes: ", bucket_bytes, " is below 1"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  ncclComm_t comm = handle_->comm;
  absl::Status done = TorchCall("NCCL broadcast", [&]() -> absl::Status {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_index_));
    const c10::cuda::CUDAStream stream = *handle_->stream;
    // After what the caller queued (an optimiser step writing the weights).
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_index_)));
    ready.block(stream);
    for (const auto& [data, bytes] : spans) {
      for (int64_t offset = 0; offset < bytes; offset += bucket_bytes) {
        char* piece = static_cast<char*>(data) + offset;
        const size_t count = static_cast<size_t>(std::min(bucket_bytes, bytes - offset));
        ncclResult_t r = ncclBroadcast(piece, piece, count, ncclInt8, root, comm, stream.stream());
        if (r != ncclSuccess && r != ncclInProgress) return NcclStatus("ncclBroadcast", r, comm);
        if (r == ncclInProgress) {
          if (absl::Status s = WaitIdle(comm, deadline, "ncclBroadcast", nullptr); !s.ok()) return s;
        }
      }
    }
    at::cuda::CUDAEvent finished;
    finished.record(stream);
    if (absl::Status s = PollComm(comm, deadline, "NCCL broadcast", nullptr,
                                  [&](ncclResult_t) { return finished.query(); });
        !s.ok()) {
      if (!absl::IsDeadlineExceeded(s)) return s;
      return absl::DeadlineExceededError(absl::StrCat("NCCL broadcast: not complete within ",
                                                      absl::FormatDuration(timeout),
                                                      " (a member is gone or stuck)"));
    }
    // Later work on the current stream (the next step) follows the broadcast.
    finished.block(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_index_)));
    return absl::OkStatus();
  });
  if (!done.ok()) {
    ncclCommAbort(comm);
    handle_->comm = nullptr;
    broken_ = true;
    // The abort ends the group's kernels; wait for that, so nothing the
    // caller does next to the buffers (a re-fetch) races an NCCL write.
    cudaStreamSynchronize(handle_->raw_stream);
  }
  return done;
}

#else  // !KFORGE_WITH_NCCL

struct NcclCommunicator::Handle {};

namespace {
absl::Status NoNccl() {
  return absl::UnimplementedError(
      "this build has no NCCL (a CPU build, or KFORGE_ENABLE_NCCL off): weights travel over gRPC");
}
}  // namespace

bool NcclCommunicator::Available() { return false; }

std::string NcclCommunicator::DeviceUuid(int) { return ""; }

absl::StatusOr<std::string> NcclCommunicator::NewUniqueId() { return NoNccl(); }

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Join(
    const std::string&, int, int, int, absl::Duration, const std::function<bool()>&) {
  return NoNccl();
}

NcclCommunicator::~NcclCommunicator() = default;

absl::Status NcclCommunicator::BroadcastSpans(const std::vector<std::pair<void*, int64_t>>&, int,
                                              int64_t, absl::Duration) {
  return NoNccl();
}

#endif  // KFORGE_WITH_NCCL

NcclCommunicator::NcclCommunicator(std::unique_ptr<Handle> handle, int rank, int world_size,
                                   int device_index)
    : handle_(std::move(handle)), rank_(rank), world_size_(world_size), device_index_(device_index) {}

absl::Status NcclCommunicator::Broadcast(const FlatParameters& params, int root,
                                         int64_t bucket_bytes, absl::Duration timeout) {
  if (params.device_index() != device_index_) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL broadcast: the parameters are on device ",
                                                   params.device_index(), ", the group on ",
                                                   device_index_));
  }
  std::vector<std::pair<void*, int64_t>> spans;
  for (const FlatParameters::Buffer& buffer : params.buffers()) spans.emplace_back(buffer.data, buffer.bytes);
  return BroadcastSpans(spans, root, bucket_bytes, timeout);
}

absl::Status NcclCommunicator::BroadcastBytes(void* data, int64_t bytes, int root,
                                              int64_t bucket_bytes, absl::Duration timeout) {
  return BroadcastSpans({{data, bytes}}, root, bucket_bytes, timeout);
}

}  // namespace kforge
