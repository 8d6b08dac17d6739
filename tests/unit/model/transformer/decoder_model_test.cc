// DecoderModel::Forward against a reference decoder written out here head by
// head and position by position from transformers' modeling code (explicit
// pair rotation for RoPE, kv head h / group, fp32 RMSNorm), for each
// architecture; and checks that the architecture-specific tensors (Qwen2
// biases, Qwen3 q/k norms) take part.
#include "model/transformer/decoder_model.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "model/transformer/random_weights.h"
#include "model/transformer/rope.h"

namespace kforge {
namespace {

at::Tensor RefRmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return weight * (x / (x.pow(2).mean(-1, true) + eps).sqrt());
}

at::Tensor RefLinear(const TensorMap& w, const std::string& name, const at::Tensor& x) {
  at::Tensor out = at::matmul(x, w.at(name + ".weight").t());
  auto bias = w.find(name + ".bias");
  return bias == w.end() ? out : out + bias->second;
}

// x [T, D] of one head at positions 0..T-1: (x_i, x_{i+D/2}) rotated by t * f_i.
at::Tensor RefRope(const at::Tensor& x, const at::Tensor& inv_freq) {
  const int64_t half = x.size(1) / 2;
  at::Tensor out = x.clone();
  for (int64_t t = 0; t < x.size(0); ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * inv_freq[i].item<double>();
      const at::Tensor a = x[t][i], b = x[t][i + half];
      out[t][i] = a * std::cos(angle) - b * std::sin(angle);
      out[t][i + half] = b * std::cos(angle) + a * std::sin(angle);
    }
  }
  return out;
}

// One causal head: q, k, v [T, D].
at::Tensor RefHead(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t length = q.size(0);
  at::Tensor out = at::zeros_like(q);
  for (int64_t t = 0; t < length; ++t) {
    const at::Tensor scores =
        at::matmul(k.narrow(0, 0, t + 1), q[t]) / std::sqrt(static_cast<double>(q.size(1)));
    out[t] = at::matmul(at::softmax(scores, 0), v.narrow(0, 0, t + 1));
  }
  return out;
}

at::Tensor RefAttention(const ModelConfig& c, const TensorMap& w, const std::string& p,
                        const at::Tensor& x, const at::Tensor& inv_freq) {
  const at::Tensor q = RefLinear(w, p + "q_proj", x), k = RefLinear(w, p + "k_proj", x);
  const at::Tensor v = RefLinear(w, p + "v_proj", x);
  const int64_t d = c.head_dim, group = c.num_attention_heads / c.num_key_value_heads;
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < c.num_attention_heads; ++h) {
    const int64_t g = h / group;
    at::Tensor qh = q.narrow(1, h * d, d), kh = k.narrow(1, g * d, d);
    if (w.count(p + "q_norm.weight") > 0) {
      qh = RefRmsNorm(qh, w.at(p + "q_norm.weight"), c.rms_norm_eps);
      kh = RefRmsNorm(kh, w.at(p + "k_norm.weight"), c.rms_norm_eps);
    }
    heads.push_back(RefHead(RefRope(qh, inv_freq), RefRope(kh, inv_freq), v.narrow(1, g * d, d)));
  }
  return RefLinear(w, p + "o_proj", at::cat(heads, 1));
}

// tokens -> logits [T, V]. The rotary frequencies come from the library;
// rope_test checks them against transformers' formulas.
at::Tensor ReferenceLogits(const ModelConfig& c, const TensorMap& w,
                           const std::vector<int64_t>& tokens) {
  const at::Tensor inv_freq = RopeInverseFrequencies(c);
  at::Tensor h = w.at("model.embed_tokens.weight").index_select(0, at::tensor(tokens, at::kLong));
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = absl::StrCat("model.layers.", layer, ".");
    const at::Tensor x = RefRmsNorm(h, w.at(p + "input_layernorm.weight"), c.rms_norm_eps);
    h = h + RefAttention(c, w, p + "self_attn.", x, inv_freq);
    const at::Tensor y = RefRmsNorm(h, w.at(p + "post_attention_layernorm.weight"), c.rms_norm_eps);
    const at::Tensor gate = RefLinear(w, p + "mlp.gate_proj", y);
    h = h + RefLinear(w, p + "mlp.down_proj",
                      gate * at::sigmoid(gate) * RefLinear(w, p + "mlp.up_proj", y));
  }
  h = RefRmsNorm(h, w.at("model.norm.weight"), c.rms_norm_eps);
  const std::string head = c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  return at::matmul(h, w.at(head).t());
}

// ids [1, T].
at::Tensor Row(const std::vector<int64_t>& tokens) {
  return at::tensor(tokens, at::kLong).unsqueeze(0);
}

std::unique_ptr<DecoderModel> MakeModel(const ModelConfig& config, const TensorMap& tensors) {
  absl::StatusOr<std::unique_ptr<DecoderModel>> model =
      DecoderModel::Create(config, TensorMapSource(tensors), DecoderOptions());
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

at::Tensor ForwardLogits(const DecoderModel& model, const at::Tensor& ids) {
  absl::StatusOr<at::Tensor> logits = model.Forward(ids);
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *logits : at::Tensor();
}

double MaxDifference(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

struct ArchitectureCase {
  std::string name;
  ModelConfig config;
};

void PrintTo(const ArchitectureCase& c, std::ostream* os) { *os << c.name; }

std::vector<ArchitectureCase> Architectures() {
  ModelConfig llama_bias = TinyDecoderConfig(Architecture::kLlama);
  llama_bias.attention_bias = true;  // q, k, v and o_proj biases, as transformers' Llama
  return {{"Llama", TinyDecoderConfig(Architecture::kLlama)},
          {"Qwen2", TinyDecoderConfig(Architecture::kQwen2)},
          {"Qwen3", TinyDecoderConfig(Architecture::kQwen3)},
          {"LlamaWithAttentionBias", llama_bias}};
}

class DecoderReferenceTest : public ::testing::TestWithParam<ArchitectureCase> {};

TEST_P(DecoderReferenceTest, ForwardMatchesReferenceDecoder) {
  const ModelConfig& config = GetParam().config;
  const TensorMap tensors = *RandomDecoderWeights(config, /*seed=*/11);
  std::unique_ptr<DecoderModel> model = MakeModel(config, tensors);
  ASSERT_NE(model, nullptr);
  const std::vector<int64_t> row0 = {5, 17, 3, 60, 22, 9, 41};
  const std::vector<int64_t> row1 = {1, 2, 63, 0, 33, 33, 8};
  const at::Tensor ids = at::stack({at::tensor(row0, at::kLong), at::tensor(row1, at::kLong)});
  const at::Tensor logits = ForwardLogits(*model, ids);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 7, config.vocab_size}));
  EXPECT_LT(MaxDifference(logits[0], ReferenceLogits(config, tensors, row0)), 1e-4);
  EXPECT_LT(MaxDifference(logits[1], ReferenceLogits(config, tensors, row1)), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Architectures, DecoderReferenceTest, ::testing::ValuesIn(Architectures()),
                         [](const auto& info) { return info.param.name; });

// Perturbs one tensor by a visible amount and reports how far the logits move.
double LogitShift(const ModelConfig& config, const std::string& name) {
  TensorMap tensors = *RandomDecoderWeights(config, /*seed=*/3);
  const at::Tensor ids = Row({4, 8, 15, 16, 23, 42});
  const at::Tensor before = ForwardLogits(*MakeModel(config, tensors), ids);
  EXPECT_EQ(tensors.count(name), 1u) << name;
  at::manual_seed(1);
  tensors[name] = tensors[name] + 0.5 * at::randn_like(tensors[name]);
  return MaxDifference(before, ForwardLogits(*MakeModel(config, tensors), ids));
}

TEST(DecoderModelTest, Qwen2QkvBiasesChangeTheLogits) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kQwen2);
  for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
    EXPECT_GT(LogitShift(config, absl::StrCat("model.layers.0.self_attn.", proj, ".bias")), 1e-3)
        << proj;
  }
}

TEST(DecoderModelTest, Qwen3QkNormsChangeTheLogits) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kQwen3);
  EXPECT_GT(LogitShift(config, "model.layers.1.self_attn.q_norm.weight"), 1e-3);
  EXPECT_GT(LogitShift(config, "model.layers.1.self_attn.k_norm.weight"), 1e-3);
}

TEST(DecoderModelTest, UntiedLmHeadIsUsed) {
  EXPECT_GT(LogitShift(TinyDecoderConfig(Architecture::kLlama), "lm_head.weight"), 1e-3);
}

TEST(DecoderModelTest, RightPaddingDoesNotChangeEarlierPositions) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kQwen3);
  std::unique_ptr<DecoderModel> model = MakeModel(config, *RandomDecoderWeights(config, 5));
  const at::Tensor short_row = at::tensor(std::vector<int64_t>{7, 3, 9}, at::kLong);
  const at::Tensor padded = at::stack(
      {at::tensor(std::vector<int64_t>{1, 2, 3, 4, 5}, at::kLong),
       at::cat({short_row, at::zeros({2}, at::kLong)})});
  const at::Tensor batched = ForwardLogits(*model, padded);
  const at::Tensor alone = ForwardLogits(*model, short_row.unsqueeze(0));  // [1, 3, V]
  EXPECT_LT(MaxDifference(batched[1].narrow(0, 0, 3), alone[0]), 1e-5);
}

TEST(DecoderModelTest, ForwardCarriesGradientsToTheWeights) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kQwen2);
  std::unique_ptr<DecoderModel> model = MakeModel(config, *RandomDecoderWeights(config, 9));
  for (auto& [name, tensor] : model->NamedParameters()) tensor.requires_grad_(true);
  const at::Tensor logits = ForwardLogits(*model, Row({3, 1, 4, 1, 5}));
  at::log_softmax(logits, -1).select(-1, 2).sum().backward();
  for (auto& [name, tensor] : model->NamedParameters()) {
    ASSERT_TRUE(tensor.grad().defined()) << name;
    EXPECT_GT(tensor.grad().abs().sum().item<double>(), 0.0) << name;
  }
}

TEST(DecoderModelTest, NamedParametersAliasTheModelWeights) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kLlama);
  std::unique_ptr<DecoderModel> model = MakeModel(config, *RandomDecoderWeights(config, 2));
  const at::Tensor ids = Row({9, 8, 7});
  const at::Tensor before = ForwardLogits(*model, ids);
  for (auto& [name, tensor] : model->NamedParameters()) {
    if (name == "model.norm.weight") tensor.mul_(2.0);
  }
  EXPECT_GT(MaxDifference(before, ForwardLogits(*model, ids)), 1e-3);
}

// Without autograd q/k/v and gate/up run as one GEMM each over the weights
// the loader packs back to back (decoder_layer.cc); with autograd, or for a
// layer one of whose parts was re-homed, as one GEMM per part. Same logits.
TEST(DecoderModelTest, StackedProjectionsWithoutAutogradComputeWhatSeparateOnesDo) {
  for (Architecture architecture :
       {Architecture::kLlama, Architecture::kQwen2, Architecture::kQwen3}) {
    const ModelConfig config = TinyDecoderConfig(architecture);
    std::unique_ptr<DecoderModel> model = MakeModel(config, *RandomDecoderWeights(config, 6));
    ASSERT_NE(model, nullptr);
    std::map<std::string, at::Tensor> named;
    for (auto& [name, tensor] : model->NamedParameters()) named[name] = tensor;
    const std::string p = "model.layers.0.";
    auto follows = [&](const std::string& second, const std::string& first) {
      const at::Tensor& a = named.at(p + first);
      return named.at(p + second).data_ptr<float>() == a.data_ptr<float>() + a.numel();
    };
    EXPECT_TRUE(follows("self_attn.k_proj.weight", "self_attn.q_proj.weight"));
    EXPECT_TRUE(follows("self_attn.v_proj.weight", "self_attn.k_proj.weight"));
    EXPECT_TRUE(follows("mlp.up_proj.weight", "mlp.gate_proj.weight"));
    if (architecture == Architecture::kQwen2) {
      EXPECT_TRUE(follows("self_attn.v_proj.bias", "self_attn.k_proj.bias"));
    }
    const at::Tensor ids = Row({3, 14, 15, 9, 26, 5});
    const at::Tensor separate = ForwardLogits(*model, ids);  // autograd on
    auto without_autograd = [&] {
      c10::NoGradGuard no_grad;
      return ForwardLogits(*model, ids);
    };
    EXPECT_LT(MaxDifference(without_autograd(), separate), 1e-5);
    {
      c10::NoGradGuard no_grad;
      named.at(p + "self_attn.k_proj.weight").set_data(named.at(p + "self_attn.k_proj.weight").clone());
      named.at(p + "mlp.up_proj.weight").set_data(named.at(p + "mlp.up_proj.weight").clone());
    }
    EXPECT_FALSE(follows("self_attn.k_proj.weight", "self_attn.q_proj.weight"));
    EXPECT_LT(MaxDifference(without_autograd(), separate), 1e-5);
  }
}

TEST(DecoderModelTest, ForwardRejectsBadInput) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kLlama);
  std::unique_ptr<DecoderModel> model = MakeModel(config, *RandomDecoderWeights(config, 2));
  EXPECT_EQ(model->Forward(Row({1, 64})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->Forward(Row({1, -1})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->Forward(at::tensor({1, 2}, at::kLong)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->Forward(at::ones({1, 2}, at::kFloat)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DecoderModelTest, Bfloat16ModelStaysCloseToFloat32) {
  const ModelConfig config = TinyDecoderConfig(Architecture::kQwen2);
  const TensorMap tensors = *RandomDecoderWeights(config, 4);
  absl::StatusOr<std::unique_ptr<DecoderModel>> bf16 =
      DecoderModel::Create(config, TensorMapSource(tensors), {at::kCPU, at::kBFloat16});
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  const at::Tensor ids = Row({2, 7, 1, 8, 2, 8});
  const at::Tensor low = ForwardLogits(**bf16, ids);
  EXPECT_EQ(low.scalar_type(), at::kBFloat16);
  const at::Tensor full = ForwardLogits(*MakeModel(config, tensors), ids);
  // bf16 keeps 8 bits of mantissa; through 2 layers the logits stay within a few percent.
  EXPECT_LT(MaxDifference(low.to(at::kFloat), full), 0.1 * full.abs().max().item<double>());
}

}  // namespace
}  // namespace kforge
