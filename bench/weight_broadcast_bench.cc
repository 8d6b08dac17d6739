// Weight broadcast benchmark (issue #5), run by hand on a machine with two
// GPUs; prints a table.
//
//   NCCL_NVLS_ENABLE=0 build/bin/kforge_weight_broadcast_bench --shapes 1.5b,3b --reps 10
//
// For each model shape (Qwen2.5-Coder-1.5B and -3B: random bf16 weights), a
// learner-side model on cuda:0 and a worker-side one on cuda:1, both
// re-homed into flat buffers (FlatParameters) as the learner and a rollout
// worker do. Rank 0 and rank 1 run on their own threads, as they would in
// their own processes, and every repetition measures, side by side:
//   kforge: NcclCommunicator::Broadcast of the flat parameters (the
//           learner's path: a non-blocking communicator, buckets of
//           --bucket_bytes, completion polled against a deadline), from the
//           call to its return on rank 0;
//   raw:    one ncclBroadcast of the same number of bytes from a plain buffer
//           on a blocking communicator, from the call to the end of
//           cudaStreamSynchronize on rank 0.
// Reports the median seconds and GB/s (bytes / seconds) of each and their
// ratio, then checks that the worker's parameters equal the learner's.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/random_weights.h"
#include "model/weights/flat_parameters.h"
#include "model/weights/nccl_communicator.h"

ABSL_FLAG(std::string, shapes, "1.5b,3b", "model shapes: 1.5b, 3b (Qwen2.5-Coder)");
ABSL_FLAG(int, reps, 10, "timed repetitions per path (after 2 warm-up ones)");
ABSL_FLAG(int64_t, bucket_bytes, 268435456, "kforge's bucket size (LearnerConfig default)");

namespace kforge {
namespace {

using Clock = std::chrono::steady_clock;

ModelConfig QwenCoderShape(const std::string& name) {
  ModelConfig c = TinyDecoderConfig(Architecture::kQwen2);  // biases, tied embeddings
  c.vocab_size = 151936;
  c.max_position_embeddings = 32768;
  c.rope_theta = 1000000.0;
  if (name == "3b") {
    c.hidden_size = 2048, c.intermediate_size = 11008, c.num_hidden_layers = 36;
    c.num_attention_heads = 16, c.num_key_value_heads = 2, c.head_dim = 128;
  } else {
    c.hidden_size = 1536, c.intermediate_size = 8960, c.num_hidden_layers = 28;
    c.num_attention_heads = 12, c.num_key_value_heads = 2, c.head_dim = 128;
  }
  return c;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool Check(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, ncclGetErrorString(r));
  return false;
}

// The plain NCCL baseline: one blocking communicator per rank.
struct RawRank {
  ncclComm_t comm = nullptr;
  at::Tensor buffer;
  cudaStream_t stream = nullptr;
};

int RunShape(const std::string& shape) {
  const ModelConfig config = QwenCoderShape(shape);
  std::unique_ptr<DecoderModel> models[2];
  std::unique_ptr<FlatParameters> flat[2];
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<TensorMap> weights = RandomDecoderWeights(config, /*seed=*/rank + 1);
    if (!weights.ok()) return std::fprintf(stderr, "%s\n", weights.status().ToString().c_str()), 1;
    auto model = DecoderModel::Create(config, TensorMapSource(*std::move(weights)),
                                      {at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(rank)),
                                       at::kBFloat16});
    if (!model.ok()) return std::fprintf(stderr, "%s\n", model.status().ToString().c_str()), 1;
    models[rank] = *std::move(model);
    auto flattened = FlatParameters::Create(models[rank].get());
    if (!flattened.ok()) return std::fprintf(stderr, "%s\n", flattened.status().ToString().c_str()), 1;
    flat[rank] = *std::move(flattened);
  }
  const int64_t bytes = flat[0]->bytes();
  std::printf("%s: %s, %.3f GB of bf16 parameters\n", shape.c_str(), flat[0]->Layout().c_str(),
              bytes / 1e9);

  // kforge's communicators.
  auto id = NcclCommunicator::NewUniqueId();
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> comm[2];
  {
    std::thread peer([&] { comm[1] = NcclCommunicator::Join(*id, 1, 2, 1, absl::Seconds(120)); });
    comm[0] = NcclCommunicator::Join(*id, 0, 2, 0, absl::Seconds(120));
    peer.join();
  }
  if (!comm[0].ok() || !comm[1].ok()) {
    std::fprintf(stderr, "join: %s / %s\n", comm[0].status().ToString().c_str(),
                 comm[1].status().ToString().c_str());
    return 1;
  }
  // The raw baseline's.
  RawRank raw[2];
  ncclUniqueId raw_id;
  if (!Check(ncclGetUniqueId(&raw_id), "ncclGetUniqueId")) return 1;
  {
    ncclResult_t results[2];
    std::thread peer([&] {
      c10::cuda::CUDAGuard guard(1);
      results[1] = ncclCommInitRank(&raw[1].comm, 2, raw_id, 1);
    });
    {
      c10::cuda::CUDAGuard guard(0);
      results[0] = ncclCommInitRank(&raw[0].comm, 2, raw_id, 0);
    }
    peer.join();
    if (!Check(results[0], "ncclCommInitRank 0") || !Check(results[1], "ncclCommInitRank 1")) return 1;
  }
  for (int rank = 0; rank < 2; ++rank) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(rank));
    raw[rank].buffer = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(
                                              at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(rank))));
    cudaStreamCreateWithFlags(&raw[rank].stream, cudaStreamNonBlocking);
  }

  const int64_t bucket_bytes = absl::GetFlag(FLAGS_bucket_bytes);
  auto kforge_once = [&]() -> double {
    absl::Status received;
    std::thread peer([&] {
      received = (*comm[1])->Broadcast(*flat[1], 0, bucket_bytes, absl::Seconds(120));
    });
    const auto start = Clock::now();
    const absl::Status sent = (*comm[0])->Broadcast(*flat[0], 0, bucket_bytes, absl::Seconds(120));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    peer.join();
    if (!sent.ok() || !received.ok()) {
      std::fprintf(stderr, "kforge broadcast: %s / %s\n", sent.ToString().c_str(),
                   received.ToString().c_str());
      return -1;
    }
    return seconds;
  };
  auto raw_once = [&]() -> double {
    ncclResult_t results[2] = {ncclSuccess, ncclSuccess};
    auto run = [&](int rank) {
      c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(rank));
      results[rank] = ncclBroadcast(raw[rank].buffer.data_ptr(), raw[rank].buffer.data_ptr(),
                                    static_cast<size_t>(bytes), ncclInt8, 0, raw[rank].comm,
                                    raw[rank].stream);
      cudaStreamSynchronize(raw[rank].stream);
    };
    std::thread peer(run, 1);
    const auto start = Clock::now();
    run(0);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    peer.join();
    if (results[0] != ncclSuccess || results[1] != ncclSuccess) {
      std::fprintf(stderr, "raw broadcast: %s / %s\n", ncclGetErrorString(results[0]),
                   ncclGetErrorString(results[1]));
      return -1;
    }
    return seconds;
  };

  std::vector<double> kforge_s, raw_s;
  const int reps = absl::GetFlag(FLAGS_reps);
  for (int i = 0; i < reps + 2; ++i) {
    // Alternating, so both see the same machine state.
    const double k = kforge_once();
    const double r = raw_once();
    if (k < 0 || r < 0) return 1;
    if (i >= 2) kforge_s.push_back(k), raw_s.push_back(r);
  }
  const double k = Median(kforge_s), r = Median(raw_s);
  std::printf("  %-34s %10s %10s\n", "", "seconds", "GB/s");
  std::printf("  %-34s %10.4f %10.1f\n", "kforge (flat parameters, buckets)", k, bytes / 1e9 / k);
  std::printf("  %-34s %10.4f %10.1f\n", "raw ncclBroadcast (one buffer)", r, bytes / 1e9 / r);
  std::printf("  kforge / raw throughput: %.1f%% (min/max kforge %.4f/%.4f s, raw %.4f/%.4f s, %d reps)\n",
              100.0 * r / k, *std::min_element(kforge_s.begin(), kforge_s.end()),
              *std::max_element(kforge_s.begin(), kforge_s.end()),
              *std::min_element(raw_s.begin(), raw_s.end()),
              *std::max_element(raw_s.begin(), raw_s.end()), reps);

  // The worker's parameters are the learner's, byte for byte.
  bool same = true;
  auto theirs = models[1]->NamedParameters();
  size_t i = 0;
  for (const auto& [name, tensor] : models[0]->NamedParameters()) {
    same = same && theirs[i].first == name && at::equal(tensor.cpu(), theirs[i].second.cpu());
    ++i;
  }
  std::printf("  worker parameters equal the learner's: %s\n", same ? "yes" : "NO");
  for (RawRank& rank : raw) {
    ncclCommDestroy(rank.comm);
    cudaStreamDestroy(rank.stream);
  }
  return same ? 0 : 1;
}

int Main() {
  c10::NoGradGuard no_grad;
  if (at::cuda::getNumGPUs() < 2) {
    std::fprintf(stderr, "needs two GPUs, has %d\n", static_cast<int>(at::cuda::getNumGPUs()));
    return 2;
  }
  const std::vector<std::string> shapes = absl::StrSplit(absl::GetFlag(FLAGS_shapes), ',');
  for (const std::string& shape : shapes) {
    if (int rc = RunShape(shape); rc != 0) return rc;
  }
  return 0;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return kforge::Main();
}
