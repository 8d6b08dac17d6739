// Rollout sampling benchmark (issue #4), run by hand; prints a table.
//
//   build/bin/kforge_rollout_bench --checkpoint DIR --device cuda:0 \
//       --batches 1,16,64,256 --prompt_tokens 512 --new_tokens 1024
//
// For each batch size B: B prompts of prompt_tokens pseudo-random ids (the
// formula PromptToken below, which bench/hf_generate_bench.py shares), one
// sample each at temperature 1, EOS ignored, new_tokens generated through the
// Generator (prefill, continuous batching, KV cache, TokenSampler). Reports
// output tokens per second over the whole run (prefill included), decode
// tokens per second, time to first token, GPU memory in use, and the
// memory-bandwidth limit: every decode step must read the weights once and
// each sequence's keys and values so far, so
//   limit tok/s = B * steps / sum over steps of (weight bytes + KV bytes read) / copy bandwidth
// with the copy bandwidth measured here (device-to-device copy, bytes read +
// written).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#if KFORGE_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "model/generation/generator.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/transformer/checkpoint_loader.h"

ABSL_FLAG(std::string, checkpoint, "", "Hugging Face checkpoint folder");
ABSL_FLAG(std::string, tokenizer, "",
          "tokenizer.json (default: the checkpoint's); only stop matching uses it");
ABSL_FLAG(std::string, device, "cuda:0", "cpu or cuda:N");
ABSL_FLAG(std::string, dtype, "bfloat16", "float32, bfloat16 or float16");
ABSL_FLAG(std::string, batches, "1,16,64,256", "batch sizes, comma-separated");
ABSL_FLAG(int, prompt_tokens, 512, "prompt length");
ABSL_FLAG(int, new_tokens, 1024, "tokens generated per sequence (EOS ignored)");
ABSL_FLAG(bool, cuda_graphs, true, "replay decode steps from CUDA graphs (on a GPU)");
ABSL_FLAG(std::string, decode_attention, "kforge",
          "decode attention, comma-separated to compare: kforge (kforge's kernel where it "
          "applies) or sdpa (LibTorch's scaled_dot_product_attention)");

namespace kforge {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Shared with bench/hf_generate_bench.py: row b, position j.
int64_t PromptToken(int64_t b, int64_t j, int64_t vocab) {
  return (b * 7919 + j * 104729 + 17) % (vocab - 1) + 1;
}

void Sync(const at::Device& device) {
  if (device.is_cuda()) (void)at::ones({1}, at::TensorOptions().device(device)).sum().item<float>();
}

// Device-to-device copy bandwidth, bytes read + written per second.
double CopyBandwidth(const at::Device& device) {
  const int64_t bytes = int64_t{1} << 30;
  at::Tensor src = at::empty({bytes}, at::TensorOptions().device(device).dtype(at::kByte));
  at::Tensor dst = at::empty_like(src);
  src.fill_(1);
  dst.copy_(src);
  Sync(device);
  const int reps = device.is_cuda() ? 20 : 2;
  const auto start = Clock::now();
  for (int i = 0; i < reps; ++i) dst.copy_(src);
  Sync(device);
  return 2.0 * static_cast<double>(bytes) * reps / Seconds(Clock::now() - start);
}

struct Result {
  int64_t batch = 0;
  double total_s = 0, ttft_s = 0, decode_tok_s = 0, tok_s = 0, limit_tok_s = 0, mem_gib = 0;
  double step_ms = 0;        // mean wall time of a decode step
  uint64_t captures = 0;     // CUDA graphs captured
};

int64_t GpuBytesInUse(const at::Device& device) {
#if KFORGE_WITH_CUDA
  if (device.is_cuda()) {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) return static_cast<int64_t>(total - free);
  }
#endif
  return 0;
}

void ReleaseCache(const at::Device& device) {
#if KFORGE_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

absl::StatusOr<Result> RunBatch(const DecoderModel& model, const BpeTokenizer& tokenizer,
                                int64_t batch, int prompt_len, int new_tokens,
                                double weight_bytes, double bandwidth) {
  const ModelConfig& config = model.config();
  const at::Device device = model.options().device;
  ReleaseCache(device);
  KF_ASSIGN_OR_RETURN(std::unique_ptr<Generator> gen,
                      Generator::Create(&model, &tokenizer,
                                        {.slots = batch,
                                         .max_len = prompt_len + new_tokens,
                                         .decode = {.cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs)}}));
  for (int64_t b = 0; b < batch; ++b) {
    GroupRequest request{.group_id = std::to_string(b)};
    for (int j = 0; j < prompt_len; ++j) {
      request.prompt_tokens.push_back(
          static_cast<int32_t>(PromptToken(b, j, config.vocab_size)));
    }
    request.samples.push_back({.temperature = 1.0, .seed = static_cast<uint64_t>(b + 1)});
    request.stop.max_new_tokens = new_tokens;
    KF_RETURN_IF_ERROR(gen->Enqueue(std::move(request)));
  }
  Sync(device);
  const auto start = Clock::now();
  Clock::time_point decode_start{};
  double ttft = 0;
  uint64_t decode_tokens_before = 0;
  while (!gen->idle()) {
    KF_ASSIGN_OR_RETURN(std::vector<GeneratedSample> done, gen->Step());
    (void)done;
    if (decode_start == Clock::time_point{} && gen->stats().waiting_groups == 0) {
      decode_start = Clock::now();  // every prompt prefilled, first decode step done
      decode_tokens_before = gen->stats().generated_tokens;
      ttft = Seconds(decode_start - start);
    }
  }
  const auto end = Clock::now();
  Result r;
  r.batch = batch;
  r.total_s = Seconds(end - start);
  r.ttft_s = ttft;
  const double generated = static_cast<double>(gen->stats().generated_tokens);
  r.tok_s = generated / r.total_s;
  r.decode_tok_s = (generated - static_cast<double>(decode_tokens_before)) /
                   std::max(1e-9, Seconds(end - decode_start));
  // Per decode step t (t = 1..new_tokens-1) each sequence reads prompt + t
  // cached tokens of keys and values, plus the weights once.
  const double elem = model.options().dtype == at::kFloat ? 4.0 : 2.0;
  const double kv_per_token =
      2.0 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * elem;
  double floor_s = 0;
  for (int t = 1; t < new_tokens; ++t) {
    floor_s += (weight_bytes + batch * (prompt_len + t) * kv_per_token) / bandwidth;
  }
  r.limit_tok_s = batch * (new_tokens - 1) / floor_s;
  r.step_ms = 1e3 * batch / r.decode_tok_s;
  r.captures = gen->stats().decoder.captures;
  r.mem_gib = static_cast<double>(GpuBytesInUse(device)) / (1 << 30);
  return r;
}

int RunAll(const std::string& dir, const at::Device& device, at::ScalarType dtype,
           const std::string& dtype_name, bool kforge_attention);

int Main() {
  const std::string dir = absl::GetFlag(FLAGS_checkpoint);
  if (dir.empty()) {
    std::fprintf(stderr, "--checkpoint is required\n");
    return 2;
  }
  const std::string dtype_name = absl::GetFlag(FLAGS_dtype);
  const at::ScalarType dtype = dtype_name == "float32"   ? at::kFloat
                               : dtype_name == "float16" ? at::kHalf
                                                         : at::kBFloat16;
  const at::Device device(absl::GetFlag(FLAGS_device));
  for (absl::string_view attention : absl::StrSplit(absl::GetFlag(FLAGS_decode_attention), ',')) {
    if (attention != "kforge" && attention != "sdpa") {
      std::fprintf(stderr, "--decode_attention: \"%s\" is not kforge or sdpa\n",
                   std::string(attention).c_str());
      return 2;
    }
    if (const int status = RunAll(dir, device, dtype, dtype_name, attention == "kforge");
        status != 0) {
      return status;
    }
  }
  return 0;
}

// Loads the checkpoint and runs every batch size with one decode attention.
int RunAll(const std::string& dir, const at::Device& device, at::ScalarType dtype,
           const std::string& dtype_name, bool kforge_attention) {
  // As the rollout worker runs it: no autograd graph.
  c10::NoGradGuard no_grad;
  absl::StatusOr<std::unique_ptr<DecoderModel>> model = LoadDecoderModel(
      dir, {.device = device, .dtype = dtype, .kforge_decode_attention = kforge_attention});
  if (!model.ok()) {
    std::fprintf(stderr, "load: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  std::string tokenizer_path = absl::GetFlag(FLAGS_tokenizer);
  if (tokenizer_path.empty()) tokenizer_path = dir + "/tokenizer.json";
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = BpeTokenizer::FromFile(tokenizer_path);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tokenizer: %s\n", std::string(tokenizer.status().message()).c_str());
    return 1;
  }
  // Bytes a decode step reads of the weights: every parameter once (a tied
  // lm_head is the embedding, listed once; only B rows of an untied
  // embedding are read, which is negligible and left out).
  const ModelConfig& config = (*model)->config();
  double weight_bytes = 0;
  for (const auto& [name, tensor] : (*model)->NamedParameters()) {
    if (name == "model.embed_tokens.weight" && !config.tie_word_embeddings) continue;
    weight_bytes += static_cast<double>(tensor.numel() * tensor.element_size());
  }
  const double bandwidth = CopyBandwidth(device);
  std::printf("checkpoint %s: %d layers, hidden %lld, vocab %lld, %.2f GB of weights read per step\n",
              dir.c_str(), static_cast<int>(config.num_hidden_layers),
              static_cast<long long>(config.hidden_size), static_cast<long long>(config.vocab_size),
              weight_bytes / 1e9);
  std::printf("device %s, %s; measured copy bandwidth %.0f GB/s; prompt %d, new tokens %d\n\n",
              device.str().c_str(), dtype_name.c_str(), bandwidth / 1e9,
              absl::GetFlag(FLAGS_prompt_tokens), absl::GetFlag(FLAGS_new_tokens));
  std::printf("decode steps: %s; decode attention: %s\n\n",
              absl::GetFlag(FLAGS_cuda_graphs) ? "CUDA graphs (eager where no GPU)" : "eager",
              kforge_attention ? "kforge's kernel where it applies" : "LibTorch SDPA");
  std::printf("%6s %10s %10s %12s %12s %12s %8s %9s %8s %7s\n", "batch", "total s", "TTFT s",
              "out tok/s", "decode tok/s", "limit tok/s", "of limit", "mem GiB", "ms/step",
              "graphs");
  for (absl::string_view piece : absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int64_t batch = 0;
    if (!absl::SimpleAtoi(piece, &batch) || batch <= 0) {
      std::fprintf(stderr, "--batches: bad entry \"%s\"\n", std::string(piece).c_str());
      return 2;
    }
    absl::StatusOr<Result> r =
        RunBatch(**model, **tokenizer, batch, absl::GetFlag(FLAGS_prompt_tokens),
                 absl::GetFlag(FLAGS_new_tokens), weight_bytes, bandwidth);
    if (!r.ok()) {
      std::printf("%6lld  failed: %s\n", static_cast<long long>(batch),
                  std::string(r.status().message()).c_str());
      continue;
    }
    std::printf("%6lld %10.2f %10.3f %12.0f %12.0f %12.0f %7.0f%% %9.1f %8.2f %7llu\n",
                static_cast<long long>(r->batch), r->total_s, r->ttft_s, r->tok_s,
                r->decode_tok_s, r->limit_tok_s, 100.0 * r->decode_tok_s / r->limit_tok_s,
                r->mem_gib, r->step_ms, static_cast<unsigned long long>(r->captures));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return kforge::Main();
}
