// Loading a decoder from a checkpoint folder (config.json + safetensors):
// F32, BF16 and F16 files give the model an in-memory load of the same values
// gives; errors name the tensor and the file; the tiny checkpoints of
// `kforge tiny-model` load and run for each architecture.
#include "model/transformer/checkpoint_loader.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "model/checkpoint/safetensors_writer.h"
#include "model/checkpoint/tiny_model.h"
#include "model/transformer/random_weights.h"
#include "tests/support/scratch_dir.h"

namespace kforge {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using ::kforge::testing::ScratchDir;

// The config.json transformers would write for a TinyDecoderConfig.
std::string ConfigJson(const ModelConfig& c) {
  std::string rope = "null";
  if (c.rope_scaling.type == "llama3") {
    const RopeScaling& r = c.rope_scaling;
    rope = absl::StrCat("{\"rope_type\": \"llama3\", \"factor\": ", r.factor,
                        ", \"low_freq_factor\": ", r.low_freq_factor, ", \"high_freq_factor\": ",
                        r.high_freq_factor, ", \"original_max_position_embeddings\": ",
                        r.original_max_position_embeddings, "}");
  }
  const bool own_bias_flag = c.architecture != Architecture::kQwen2;
  return absl::StrCat(
      "{\"architectures\": [\"", c.architecture_name, "\"], \"vocab_size\": ", c.vocab_size,
      ", \"hidden_size\": ", c.hidden_size, ", \"intermediate_size\": ", c.intermediate_size,
      ", \"num_hidden_layers\": ", c.num_hidden_layers, ", \"num_attention_heads\": ",
      c.num_attention_heads, ", \"num_key_value_heads\": ", c.num_key_value_heads,
      ", \"head_dim\": ", c.head_dim, ", \"rms_norm_eps\": ", c.rms_norm_eps,
      ", \"rope_theta\": ", c.rope_theta, ", \"rope_scaling\": ", rope,
      ", \"tie_word_embeddings\": ", c.tie_word_embeddings ? "true" : "false",
      own_bias_flag ? absl::StrCat(", \"attention_bias\": ", c.attention_bias ? "true" : "false")
                    : "",
      ", \"max_position_embeddings\": ", c.max_position_embeddings, ", \"eos_token_id\": 1}");
}

at::ScalarType TorchDtype(TensorDtype dtype) {
  return dtype == TensorDtype::kBF16 ? at::kBFloat16
         : dtype == TensorDtype::kF16 ? at::kHalf
                                      : at::kFloat;
}

TensorToWrite ToWrite(const std::string& name, const at::Tensor& tensor, TensorDtype dtype) {
  const at::Tensor converted = tensor.to(TorchDtype(dtype)).contiguous();
  TensorToWrite out{name, dtype, converted.sizes().vec(), {}};
  out.data.resize(converted.nbytes());
  std::memcpy(out.data.data(), converted.data_ptr(), converted.nbytes());
  return out;
}

void WriteCheckpoint(const std::filesystem::path& dir, const ModelConfig& config,
                     const TensorMap& tensors, TensorDtype dtype) {
  std::ofstream(dir / "config.json") << ConfigJson(config);
  std::vector<TensorToWrite> to_write;
  for (const auto& [name, tensor] : tensors) to_write.push_back(ToWrite(name, tensor, dtype));
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors", to_write, {{"format", "pt"}}).ok());
}

at::Tensor Logits(DecoderModel& model) {
  const at::Tensor ids = at::tensor(std::vector<int64_t>{5, 1, 60, 7, 7, 2}, at::kLong);
  absl::StatusOr<at::Tensor> logits = model.Forward(ids.unsqueeze(0));
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *logits : at::zeros({1});
}

struct LoadCase {
  Architecture architecture;
  TensorDtype dtype;
  std::string architecture_name() const {
    return TinyDecoderConfig(architecture).architecture_name;
  }
};

void PrintTo(const LoadCase& c, std::ostream* os) {
  *os << c.architecture_name() << " " << TensorDtypeName(c.dtype);
}

class CheckpointLoaderTest : public ::testing::TestWithParam<LoadCase> {};

TEST_P(CheckpointLoaderTest, FileLoadsLikeTheSameValuesInMemory) {
  const ModelConfig config = TinyDecoderConfig(GetParam().architecture);
  const TensorMap tensors = *RandomDecoderWeights(config, 8);
  ScratchDir dir;
  WriteCheckpoint(dir.path(), config, tensors, GetParam().dtype);
  absl::StatusOr<std::unique_ptr<DecoderModel>> loaded = LoadDecoderModel(dir.path(), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // The same values after the file's rounding, straight from memory.
  TensorMap rounded;
  for (const auto& [name, tensor] : tensors) {
    rounded[name] = tensor.to(TorchDtype(GetParam().dtype)).to(at::kFloat);
  }
  auto expected = DecoderModel::Create(config, TensorMapSource(rounded), {});
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_TRUE(Logits(**loaded).equal(Logits(**expected)));
  EXPECT_EQ((*loaded)->config().head_dim, config.head_dim);
}

INSTANTIATE_TEST_SUITE_P(
    Files, CheckpointLoaderTest,
    ::testing::Values(LoadCase{Architecture::kLlama, TensorDtype::kF32},
                      LoadCase{Architecture::kQwen2, TensorDtype::kBF16},
                      LoadCase{Architecture::kQwen3, TensorDtype::kF16},
                      LoadCase{Architecture::kQwen3, TensorDtype::kBF16}));

TEST(CheckpointLoaderErrorsTest, WrongShapeNamesTensorAndFile) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kQwen2);
  TensorMap tensors = *RandomDecoderWeights(config, 8);
  tensors["model.layers.1.self_attn.k_proj.bias"] = at::zeros({17});
  ScratchDir dir;
  WriteCheckpoint(dir.path(), config, tensors, TensorDtype::kF32);
  const absl::Status status = LoadDecoderModel(dir.path(), {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("model.layers.1.self_attn.k_proj.bias"), HasSubstr("[16]"),
                    HasSubstr("[17]"), HasSubstr(dir.Sub("model.safetensors"))));
}

TEST(CheckpointLoaderErrorsTest, MissingTensorIsNamed) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kLlama);
  TensorMap tensors = *RandomDecoderWeights(config, 8);
  tensors.erase("model.norm.weight");
  ScratchDir dir;
  WriteCheckpoint(dir.path(), config, tensors, TensorDtype::kF32);
  const absl::Status status = LoadDecoderModel(dir.path(), {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("model.norm.weight"), HasSubstr(dir.path())));
}

TEST(CheckpointLoaderErrorsTest, MissingFolderIsAnError) {
  EXPECT_FALSE(LoadDecoderModel("/nonexistent/kforge-model", {}).ok());
}

class TinyModelTest : public ::testing::TestWithParam<Architecture> {};

TEST_P(TinyModelTest, TinyModelCheckpointLoadsAndCachesConsistently) {
  ScratchDir dir;
  TinyModelOptions options;
  options.out_dir = dir.Sub("model");
  options.architecture = GetParam();
  options.tasks_dir = std::filesystem::path(KFORGE_TEST_SOURCE_DIR) / "tasks/kforge-mini";
  options.max_merges = 50;
  absl::StatusOr<ModelConfig> written = WriteTinyModel(options);
  ASSERT_TRUE(written.ok()) << written.status();
  absl::StatusOr<std::unique_ptr<DecoderModel>> model = LoadDecoderModel(options.out_dir, {});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int64_t> prompt = {10, 20, 30, 40};
  absl::StatusOr<at::Tensor> forward =
      (*model)->Forward(at::tensor(prompt, at::kLong).unsqueeze(0));
  ASSERT_TRUE(forward.ok()) << forward.status();
  std::unique_ptr<KvCache> cache = *(*model)->NewKvCache(1, 8);
  absl::StatusOr<at::Tensor> prefill = (*model)->Prefill(cache.get(), *cache->Allocate(), prompt);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  EXPECT_LT(((*forward)[0][-1] - *prefill).abs().max().item<double>(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Architectures, TinyModelTest,
                         ::testing::Values(Architecture::kLlama, Architecture::kQwen2,
                                           Architecture::kQwen3));

}  // namespace
}  // namespace kforge
