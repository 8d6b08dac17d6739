#include "model/checkpoint/weight_names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "model/checkpoint/safetensors_writer.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ModelConfig SmallConfig(Architecture arch) {
  ModelConfig c;
  c.architecture = arch;
  c.architecture_name = "Test";
  c.vocab_size = 10;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.tie_word_embeddings = true;
  c.attention_bias = arch == Architecture::kQwen2;
  c.qk_norm = arch == Architecture::kQwen3;
  return c;
}

std::vector<int64_t> ShapeOf(const std::vector<WeightSpec>& specs, const std::string& name) {
  for (const WeightSpec& s : specs) {
    if (s.name == name) return s.shape;
  }
  return {-1};  // absent
}

TEST(DecoderWeightSpecsTest, Qwen2HasQkvBiasesButNoOutputBias) {
  const std::vector<WeightSpec> specs = DecoderWeightSpecs(SmallConfig(Architecture::kQwen2));
  EXPECT_EQ(specs.size(), 1u + 2 * 12 + 1);
  EXPECT_EQ(specs.front().name, "model.embed_tokens.weight");
  EXPECT_THAT(specs.front().shape, ElementsAre(10, 32));
  EXPECT_THAT(ShapeOf(specs, "model.layers.1.self_attn.q_proj.weight"), ElementsAre(32, 32));
  EXPECT_THAT(ShapeOf(specs, "model.layers.1.self_attn.k_proj.weight"), ElementsAre(16, 32));
  EXPECT_THAT(ShapeOf(specs, "model.layers.0.self_attn.v_proj.bias"), ElementsAre(16));
  EXPECT_THAT(ShapeOf(specs, "model.layers.0.self_attn.q_proj.bias"), ElementsAre(32));
  EXPECT_THAT(ShapeOf(specs, "model.layers.0.self_attn.o_proj.bias"), ElementsAre(-1));
  EXPECT_THAT(ShapeOf(specs, "model.layers.0.mlp.down_proj.weight"), ElementsAre(32, 48));
  EXPECT_THAT(ShapeOf(specs, "model.layers.0.mlp.gate_proj.weight"), ElementsAre(48, 32));
  EXPECT_THAT(ShapeOf(specs, "lm_head.weight"), ElementsAre(-1));
  EXPECT_EQ(specs.back().name, "model.norm.weight");
  EXPECT_TRUE(specs.back().is_norm);
}

TEST(DecoderWeightSpecsTest, Qwen3UsesHeadDimNotHiddenOverHeads) {
  ModelConfig c = SmallConfig(Architecture::kQwen3);
  c.head_dim = 16;  // 4 heads x 16 = 64 != hidden 32
  const std::vector<WeightSpec> specs = DecoderWeightSpecs(c);
  EXPECT_EQ(specs.size(), 1u + 2 * 11 + 1);
  EXPECT_THAT(ShapeOf(specs, "model.layers.0.self_attn.q_proj.weight"), ElementsAre(64, 32));
  EXPECT_THAT(ShapeOf(specs, "model.layers.0.self_attn.o_proj.weight"), ElementsAre(32, 64));
  EXPECT_THAT(ShapeOf(specs, "model.layers.1.self_attn.k_norm.weight"), ElementsAre(16));
  EXPECT_THAT(ShapeOf(specs, "model.layers.0.self_attn.q_proj.bias"), ElementsAre(-1));
}

TEST(DecoderWeightSpecsTest, UntiedLlamaEndsWithLmHead) {
  ModelConfig c = SmallConfig(Architecture::kLlama);
  c.tie_word_embeddings = false;
  const std::vector<WeightSpec> specs = DecoderWeightSpecs(c);
  EXPECT_EQ(specs.back().name, "lm_head.weight");
  EXPECT_THAT(specs.back().shape, ElementsAre(10, 32));
  EXPECT_THAT(ShapeOf(specs, "model.layers.0.self_attn.q_norm.weight"), ElementsAre(-1));
}

class CheckDecoderWeightsTest : public ::testing::Test {
 protected:
  // Every tensor the config needs (zeros), minus `skip`, with `reshaped`
  // given an extra dim and `retyped` stored as I8.
  absl::Status Check(const ModelConfig& c, const std::string& skip = "",
                     const std::string& reshaped = "", const std::string& retyped = "") {
    std::vector<TensorToWrite> tensors;
    for (const WeightSpec& spec : DecoderWeightSpecs(c)) {
      if (spec.name == skip) continue;
      TensorToWrite t{.name = spec.name, .dtype = TensorDtype::kBF16, .shape = spec.shape};
      if (spec.name == reshaped) t.shape.push_back(1);
      if (spec.name == retyped) t.dtype = TensorDtype::kI8;
      t.data.resize(ElementCount(t.shape) * TensorDtypeSize(t.dtype));
      tensors.push_back(std::move(t));
    }
    const std::string dir = dir_.Sub(std::to_string(++count_));
    std::filesystem::create_directories(dir);
    EXPECT_TRUE(WriteSafetensors(dir + "/model.safetensors", tensors, {}).ok());
    absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt = SafetensorsCheckpoint::Open(dir);
    EXPECT_TRUE(ckpt.ok()) << ckpt.status();
    return ckpt.ok() ? CheckDecoderWeights(**ckpt, c) : ckpt.status();
  }

  testing::TempDir dir_;
  int count_ = 0;
};

TEST_F(CheckDecoderWeightsTest, CompleteCheckpointPasses) {
  EXPECT_TRUE(Check(SmallConfig(Architecture::kQwen2)).ok());
  EXPECT_TRUE(Check(SmallConfig(Architecture::kQwen3)).ok());
}

TEST_F(CheckDecoderWeightsTest, MissingWrongShapeAndWrongDtypeAreNamed) {
  const ModelConfig c = SmallConfig(Architecture::kQwen2);
  const std::string bias = "model.layers.1.self_attn.k_proj.bias";
  absl::Status missing = Check(c, bias);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr(bias));

  const std::string up = "model.layers.0.mlp.up_proj.weight";
  absl::Status shape = Check(c, "", up);
  EXPECT_EQ(shape.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.message(),
              AllOf(HasSubstr(up), HasSubstr("[48, 32, 1]"), HasSubstr("[48, 32]")));

  absl::Status dtype = Check(c, "", "", "model.norm.weight");
  EXPECT_EQ(dtype.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dtype.message(), AllOf(HasSubstr("model.norm.weight"), HasSubstr("I8")));
}

}  // namespace
}  // namespace kforge
