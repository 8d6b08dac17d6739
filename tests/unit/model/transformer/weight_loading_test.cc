// Loading weights from a TensorMapSource: presence and shape checks whose
// errors name the tensor, the variant-specific tensors being required, dtype
// conversion, tied embeddings, and config checks.
#include "model/transformer/decoder_weights.h"

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/transformer/decoder_model.h"
#include "model/transformer/random_weights.h"

namespace kforge {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

absl::Status CreateStatus(const ModelConfig& config, const TensorMap& tensors,
                          DecoderOptions options = {}) {
  return DecoderModel::Create(config, TensorMapSource(tensors), options).status();
}

TensorMap Tensors(const ModelConfig& config) { return *RandomDecoderWeights(config, 1); }

TEST(WeightLoadingTest, MissingTensorIsNamed) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kLlama);
  TensorMap tensors = Tensors(config);
  tensors.erase("model.layers.1.self_attn.k_proj.weight");
  const absl::Status status = CreateStatus(config, tensors);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("model.layers.1.self_attn.k_proj.weight"),
                                      HasSubstr("[16, 32]"), HasSubstr("in-memory weights")));
}

TEST(WeightLoadingTest, WrongShapeNamesTensorExpectedAndFound) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kQwen2);
  TensorMap tensors = Tensors(config);
  tensors["model.layers.0.mlp.up_proj.weight"] = at::zeros({32, 48});  // transposed
  const absl::Status status = CreateStatus(config, tensors);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("model.layers.0.mlp.up_proj.weight"),
                    HasSubstr("expected shape [48, 32]"), HasSubstr("found [32, 48]")));
}

TEST(WeightLoadingTest, ArchitectureSpecificTensorsAreRequired) {
  const struct {
    Architecture architecture;
    std::string name;
  } cases[] = {{Architecture::kQwen2, "model.layers.0.self_attn.v_proj.bias"},
               {Architecture::kQwen3, "model.layers.1.self_attn.q_norm.weight"},
               {Architecture::kLlama, "lm_head.weight"}};
  for (const auto& c : cases) {
    const ModelConfig config = TinyDecoderConfig(c.architecture);
    TensorMap tensors = Tensors(config);
    ASSERT_EQ(tensors.erase(c.name), 1u) << c.name;
    const absl::Status status = CreateStatus(config, tensors);
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << c.name;
    EXPECT_THAT(status.message(), HasSubstr(c.name));
  }
}

TEST(WeightLoadingTest, LayoutFollowsTheVariant) {
  DecoderWeights weights;
  std::vector<std::string> qwen2, qwen3;
  for (const WeightBinding& b : BindDecoderWeights(TinyDecoderConfig(Architecture::kQwen2), &weights)) {
    qwen2.push_back(b.name);
  }
  for (const WeightBinding& b : BindDecoderWeights(TinyDecoderConfig(Architecture::kQwen3), &weights)) {
    qwen3.push_back(b.name);
  }
  using ::testing::Contains;
  using ::testing::Not;
  EXPECT_THAT(qwen2, Contains("model.layers.1.self_attn.q_proj.bias"));
  EXPECT_THAT(qwen2, Not(Contains("model.layers.1.self_attn.o_proj.bias")));
  EXPECT_THAT(qwen2, Not(Contains("lm_head.weight")));  // tied
  EXPECT_THAT(qwen3, Contains("model.layers.0.self_attn.k_norm.weight"));
  EXPECT_THAT(qwen3, Not(Contains("model.layers.0.self_attn.q_proj.bias")));
  // transformers' Llama (and Qwen3) put attention_bias on o_proj as well.
  ModelConfig llama = TinyDecoderConfig(Architecture::kLlama);
  llama.attention_bias = true;
  std::vector<std::string> llama_names;
  for (const WeightBinding& b : BindDecoderWeights(llama, &weights)) llama_names.push_back(b.name);
  EXPECT_THAT(llama_names, Contains("model.layers.1.self_attn.k_proj.bias"));
  EXPECT_THAT(llama_names, Contains("model.layers.1.self_attn.o_proj.bias"));
  // Qwen3's q_proj is [heads * head_dim, hidden] = [64, 32].
  for (const WeightBinding& b : BindDecoderWeights(TinyDecoderConfig(Architecture::kQwen3), &weights)) {
    if (b.name == "model.layers.0.self_attn.q_proj.weight") {
      EXPECT_EQ(b.shape, (std::vector<int64_t>{64, 32}));
    }
  }
}

TEST(WeightLoadingTest, ExtraTensorsAreIgnored) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kQwen2);
  TensorMap tensors = Tensors(config);
  tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = at::ones({4});
  tensors["lm_head.weight"] = at::ones({64, 32});  // present although tied
  EXPECT_TRUE(CreateStatus(config, tensors).ok());
}

TEST(WeightLoadingTest, ConvertsSourceDtypeToTheModelDtype) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kQwen3);
  TensorMap bf16, rounded;
  for (const auto& [name, tensor] : Tensors(config)) {
    bf16[name] = tensor.to(at::kBFloat16);
    rounded[name] = bf16[name].to(at::kFloat);
  }
  auto from_bf16 = DecoderModel::Create(config, TensorMapSource(bf16), DecoderOptions());
  auto from_fp32 = DecoderModel::Create(config, TensorMapSource(rounded), DecoderOptions());
  ASSERT_TRUE(from_bf16.ok() && from_fp32.ok());
  for (auto& [name, tensor] : (*from_bf16)->NamedParameters()) {
    EXPECT_EQ(tensor.scalar_type(), at::kFloat) << name;
  }
  const at::Tensor ids = at::tensor(std::vector<int64_t>{3, 1, 4}, at::kLong).unsqueeze(0);
  EXPECT_TRUE((*(*from_bf16)->Forward(ids)).equal(*(*from_fp32)->Forward(ids)));
}

TEST(WeightLoadingTest, ModelDoesNotAliasTheSourceTensors) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kLlama);
  TensorMap tensors = Tensors(config);
  auto model = DecoderModel::Create(config, TensorMapSource(tensors), DecoderOptions());
  ASSERT_TRUE(model.ok());
  const at::Tensor ids = at::tensor(std::vector<int64_t>{3, 1, 4}, at::kLong).unsqueeze(0);
  const at::Tensor before = *(*model)->Forward(ids);
  tensors["model.norm.weight"].mul_(3.0);
  EXPECT_TRUE(before.equal(*(*model)->Forward(ids)));
}

TEST(WeightLoadingTest, TiedLmHeadIsListedOnceAsTheEmbedding) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kQwen2);
  auto model = DecoderModel::Create(config, TensorMapSource(Tensors(config)), DecoderOptions());
  ASSERT_TRUE(model.ok());
  std::vector<std::string> names;
  for (auto& [name, tensor] : (*model)->NamedParameters()) names.push_back(name);
  EXPECT_THAT(names, ::testing::Contains("model.embed_tokens.weight"));
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("lm_head.weight")));
  // embed + 2 layers x (2 norms, 4 attention projections, 3 biases, 3 MLP) + final norm
  EXPECT_EQ(names.size(), 1 + 2 * 12 + 1u);
}

TEST(WeightLoadingTest, BadConfigsAreRejectedBeforeLoading) {
  ModelConfig uneven = TinyDecoderConfig(Architecture::kLlama);
  uneven.num_key_value_heads = 3;
  EXPECT_THAT(CreateStatus(uneven, {}).message(), HasSubstr("num_key_value_heads 3"));
  ModelConfig yarn = TinyDecoderConfig(Architecture::kLlama);
  yarn.rope_scaling.type = "yarn";
  EXPECT_EQ(CreateStatus(yarn, {}).code(), absl::StatusCode::kUnimplemented);
  ModelConfig odd = TinyDecoderConfig(Architecture::kQwen3);
  odd.head_dim = 7;
  EXPECT_EQ(CreateStatus(odd, {}).code(), absl::StatusCode::kInvalidArgument);
  const ModelConfig fine = TinyDecoderConfig(Architecture::kQwen2);
  EXPECT_EQ(CreateStatus(fine, Tensors(fine), {at::kCPU, at::kDouble}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WeightLoadingTest, HeadDimDefaultsToHiddenOverHeads) {
  ModelConfig config = TinyDecoderConfig(Architecture::kLlama);
  config.head_dim = 0;
  config.num_key_value_heads = 0;
  absl::StatusOr<ModelConfig> checked = CheckDecoderConfig(config);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->head_dim, 8);
  EXPECT_EQ(checked->num_key_value_heads, 4);
}

}  // namespace
}  // namespace kforge
