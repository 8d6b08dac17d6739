#include "model/checkpoint/tiny_model.h"

#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "model/checkpoint/safetensors.h"
#include "model/checkpoint/weight_names.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kTasksDir = std::string(KFORGE_TEST_SOURCE_DIR) + "/tasks/kforge-mini";

std::vector<float> Floats(const TensorView& view) {
  std::vector<float> out(static_cast<size_t>(ElementCount(view.shape)));
  for (size_t i = 0; i < out.size(); ++i) {
    if (view.dtype == TensorDtype::kBF16) {
      uint16_t half;
      std::memcpy(&half, view.data.data() + 2 * i, 2);
      const uint32_t bits = static_cast<uint32_t>(half) << 16;
      std::memcpy(&out[i], &bits, 4);
    } else {
      std::memcpy(&out[i], view.data.data() + 4 * i, 4);
    }
  }
  return out;
}

struct Written {
  ModelConfig config;  // as LoadModelConfig reads it back
  std::unique_ptr<SafetensorsCheckpoint> checkpoint;
  std::unique_ptr<BpeTokenizer> tokenizer;
};

class TinyModelTest : public ::testing::Test {
 protected:
  std::string Write(Architecture arch, TensorDtype dtype, uint64_t seed, Written* out) {
    const std::string dir = dir_.Sub(std::to_string(++count_));
    absl::StatusOr<ModelConfig> written = WriteTinyModel({.out_dir = dir,
                                                          .architecture = arch,
                                                          .seed = seed,
                                                          .dtype = dtype,
                                                          .tasks_dir = kTasksDir});
    EXPECT_TRUE(written.ok()) << written.status();
    absl::StatusOr<ModelConfig> config = LoadModelConfig(dir + "/config.json");
    EXPECT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt = SafetensorsCheckpoint::Open(dir);
    EXPECT_TRUE(ckpt.ok()) << ckpt.status();
    absl::StatusOr<std::unique_ptr<BpeTokenizer>> tok =
        BpeTokenizer::FromFile(dir + "/tokenizer.json");
    EXPECT_TRUE(tok.ok()) << tok.status();
    if (config.ok() && ckpt.ok() && tok.ok()) {
      *out = {*std::move(config), *std::move(ckpt), *std::move(tok)};
    }
    return dir;
  }

  std::vector<int64_t> Shape(const Written& w, const std::string& name) {
    const TensorView* view = w.checkpoint->Find(name);
    return view == nullptr ? std::vector<int64_t>{-1} : view->shape;
  }

  testing::TempDir dir_;
  int count_ = 0;
};

TEST_F(TinyModelTest, Qwen2CheckpointLoadsWithBiasesAndTiedEmbeddings) {
  Written w;
  Write(Architecture::kQwen2, TensorDtype::kF32, 1, &w);
  ASSERT_NE(w.checkpoint, nullptr);
  const ModelConfig& c = w.config;
  EXPECT_EQ(c.architecture_name, "Qwen2ForCausalLM");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.vocab_size, w.tokenizer->vocab_size());
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "float32");
  EXPECT_THAT(c.eos_token_ids, ElementsAre(*w.tokenizer->TokenId("<|im_end|>")));
  EXPECT_EQ(c.bos_token_id, *w.tokenizer->TokenId("<|endoftext|>"));
  EXPECT_TRUE(CheckDecoderWeights(*w.checkpoint, c).ok());
  EXPECT_EQ(w.checkpoint->Names().size(), 1u + 2 * 12 + 1);
  EXPECT_THAT(Shape(w, "model.embed_tokens.weight"), ElementsAre(c.vocab_size, 64));
  EXPECT_THAT(Shape(w, "model.layers.1.self_attn.k_proj.bias"), ElementsAre(32));
  EXPECT_THAT(Shape(w, "model.layers.0.self_attn.o_proj.weight"), ElementsAre(64, 64));
  EXPECT_THAT(Shape(w, "lm_head.weight"), ElementsAre(-1));
}

TEST_F(TinyModelTest, Qwen3CheckpointHasQkNormsAndWideHeadsInBfloat16) {
  Written w;
  Write(Architecture::kQwen3, TensorDtype::kBF16, 1, &w);
  ASSERT_NE(w.checkpoint, nullptr);
  EXPECT_EQ(w.config.architecture, Architecture::kQwen3);
  EXPECT_EQ(w.config.head_dim, 32);
  EXPECT_TRUE(w.config.qk_norm);
  EXPECT_FALSE(w.config.attention_bias);
  EXPECT_EQ(w.config.torch_dtype, "bfloat16");
  EXPECT_TRUE(CheckDecoderWeights(*w.checkpoint, w.config).ok());
  EXPECT_EQ(w.checkpoint->Names().size(), 1u + 2 * 11 + 1);
  EXPECT_THAT(Shape(w, "model.layers.0.self_attn.q_proj.weight"), ElementsAre(128, 64));
  EXPECT_THAT(Shape(w, "model.layers.0.self_attn.o_proj.weight"), ElementsAre(64, 128));
  EXPECT_THAT(Shape(w, "model.layers.1.self_attn.k_norm.weight"), ElementsAre(32));
  EXPECT_EQ(w.checkpoint->Find("model.norm.weight")->dtype, TensorDtype::kBF16);
}

TEST_F(TinyModelTest, LlamaCheckpointHasLmHeadAndLlama3Scaling) {
  Written w;
  Write(Architecture::kLlama, TensorDtype::kF32, 1, &w);
  ASSERT_NE(w.checkpoint, nullptr);
  EXPECT_EQ(w.config.architecture, Architecture::kLlama);
  EXPECT_FALSE(w.config.tie_word_embeddings);
  EXPECT_EQ(w.config.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(w.config.rope_scaling.factor, 8.0);
  EXPECT_EQ(w.config.rope_scaling.original_max_position_embeddings, 1024);
  EXPECT_EQ(w.config.eos_token_ids.size(), 2u);
  EXPECT_TRUE(CheckDecoderWeights(*w.checkpoint, w.config).ok());
  EXPECT_EQ(w.checkpoint->Names().size(), 1u + 2 * 9 + 1 + 1);
  EXPECT_THAT(Shape(w, "lm_head.weight"), ElementsAre(w.config.vocab_size, 64));
}

TEST_F(TinyModelTest, NormsAreOnesAndWeightsHaveStd002) {
  Written w;
  Write(Architecture::kQwen2, TensorDtype::kF32, 7, &w);
  ASSERT_NE(w.checkpoint, nullptr);
  for (float v : Floats(*w.checkpoint->Find("model.layers.1.input_layernorm.weight"))) {
    ASSERT_EQ(v, 1.0f);
  }
  const std::vector<float> embed = Floats(*w.checkpoint->Find("model.embed_tokens.weight"));
  double sum = 0, sum_sq = 0;
  for (float v : embed) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double mean = sum / embed.size();
  const double stddev = std::sqrt(sum_sq / embed.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(stddev, 0.02, 0.002);
}

TEST_F(TinyModelTest, SameSeedSameBytesOtherSeedOtherBytes) {
  Written a, b, c;
  const std::string dir_a = Write(Architecture::kQwen3, TensorDtype::kF32, 5, &a);
  const std::string dir_b = Write(Architecture::kQwen3, TensorDtype::kF32, 5, &b);
  const std::string dir_c = Write(Architecture::kQwen3, TensorDtype::kF32, 6, &c);
  for (const char* file : {"model.safetensors", "tokenizer.json", "config.json"}) {
    EXPECT_EQ(ReadFileToString(dir_a + "/" + file).value(),
              ReadFileToString(dir_b + "/" + file).value())
        << file;
  }
  EXPECT_NE(ReadFileToString(dir_a + "/model.safetensors").value(),
            ReadFileToString(dir_c + "/model.safetensors").value());
}

TEST_F(TinyModelTest, GenerationConfigListsBothEndTokens) {
  Written w;
  const std::string dir = Write(Architecture::kQwen2, TensorDtype::kF32, 0, &w);
  ASSERT_NE(w.tokenizer, nullptr);
  google::protobuf::Struct generation;
  ASSERT_TRUE(
      ParseJsonMessage(ReadFileToString(dir + "/generation_config.json").value(), &generation)
          .ok());
  const auto& eos = generation.fields().at("eos_token_id").list_value();
  ASSERT_EQ(eos.values_size(), 2);
  EXPECT_EQ(eos.values(0).number_value(), *w.tokenizer->TokenId("<|im_end|>"));
  EXPECT_EQ(eos.values(1).number_value(), *w.tokenizer->TokenId("<|endoftext|>"));
}

TEST_F(TinyModelTest, TokenizerConfigReadsBackWithItsChatTemplateAndSpecialTokens) {
  Written w;
  const std::string dir = Write(Architecture::kQwen2, TensorDtype::kF32, 0, &w);
  google::protobuf::Struct config;
  ASSERT_TRUE(
      ParseJsonMessage(ReadFileToString(dir + "/tokenizer_config.json").value(), &config).ok());
  const auto& fields = config.fields();
  // The template's quotes, brackets and escaped newlines survive the trip.
  EXPECT_THAT(fields.at("chat_template").string_value(),
              HasSubstr("{{'<|im_start|>' + message['role'] + '\\n' + "));
  EXPECT_EQ(fields.at("eos_token").string_value(), "<|im_end|>");
  EXPECT_EQ(fields.at("bos_token").kind_case(), google::protobuf::Value::kNullValue);
  const auto& decoder = fields.at("added_tokens_decoder").struct_value().fields();
  const std::string im_end = absl::StrCat(*w.tokenizer->TokenId("<|im_end|>"));
  ASSERT_TRUE(decoder.contains(im_end));
  EXPECT_EQ(decoder.at(im_end).struct_value().fields().at("content").string_value(), "<|im_end|>");
}

TEST_F(TinyModelTest, RefusesNonEmptyFolderAndMissingTasks) {
  const std::string full = dir_.Sub("full");
  testing::WriteFile(full + "/keep.txt", "x");
  absl::StatusOr<ModelConfig> r = WriteTinyModel({.out_dir = full, .tasks_dir = kTasksDir});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(r.status().message(), HasSubstr(full));

  const std::string no_tasks = dir_.Sub("no-tasks");
  r = WriteTinyModel({.out_dir = dir_.Sub("out"), .tasks_dir = no_tasks});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr(no_tasks));

  r = WriteTinyModel(
      {.out_dir = dir_.Sub("out2"), .dtype = TensorDtype::kI8, .tasks_dir = kTasksDir});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kforge
