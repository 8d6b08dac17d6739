#include "model/checkpoint/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Fields = std::map<std::string, std::string>;  // key -> raw JSON value

// Qwen2.5-0.5B-Instruct's config.json.
Fields Qwen25Fields() {
  return {{"architectures", R"(["Qwen2ForCausalLM"])"},
          {"model_type", R"("qwen2")"},
          {"hidden_act", R"("silu")"},
          {"hidden_size", "896"},
          {"intermediate_size", "4864"},
          {"num_hidden_layers", "24"},
          {"num_attention_heads", "14"},
          {"num_key_value_heads", "2"},
          {"vocab_size", "151936"},
          {"max_position_embeddings", "32768"},
          {"rms_norm_eps", "1e-06"},
          {"rope_theta", "1000000.0"},
          {"tie_word_embeddings", "true"},
          {"torch_dtype", R"("bfloat16")"},
          {"bos_token_id", "151643"},
          {"eos_token_id", "151645"},
          {"sliding_window", "32768"},
          {"use_sliding_window", "false"},
          {"max_window_layers", "21"}};
}

// Qwen3-0.6B's: head_dim 128 although hidden / heads is 64.
Fields Qwen3Fields() {
  return {{"architectures", R"(["Qwen3ForCausalLM"])"},
          {"hidden_size", "1024"},
          {"intermediate_size", "3072"},
          {"num_hidden_layers", "28"},
          {"num_attention_heads", "16"},
          {"num_key_value_heads", "8"},
          {"head_dim", "128"},
          {"vocab_size", "151936"},
          {"max_position_embeddings", "40960"},
          {"rms_norm_eps", "1e-06"},
          {"rope_theta", "1000000"},
          {"rope_scaling", "null"},
          {"attention_bias", "false"},
          {"tie_word_embeddings", "true"},
          {"bos_token_id", "151643"},
          {"eos_token_id", "151645"},
          {"torch_dtype", R"("bfloat16")"}};
}

// Llama-3.2-1B-Instruct's.
Fields Llama32Fields() {
  return {{"architectures", R"(["LlamaForCausalLM"])"},
          {"hidden_size", "2048"},
          {"intermediate_size", "8192"},
          {"num_hidden_layers", "16"},
          {"num_attention_heads", "32"},
          {"num_key_value_heads", "8"},
          {"head_dim", "64"},
          {"vocab_size", "128256"},
          {"max_position_embeddings", "131072"},
          {"rms_norm_eps", "1e-05"},
          {"rope_theta", "500000.0"},
          {"rope_scaling", R"({"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                               "original_max_position_embeddings": 8192,
                               "rope_type": "llama3"})"},
          {"attention_bias", "false"},
          {"mlp_bias", "false"},
          {"tie_word_embeddings", "true"},
          {"bos_token_id", "128000"},
          {"eos_token_id", "[128001, 128008, 128009]"}};
}

class ModelConfigTest : public ::testing::Test {
 protected:
  std::string Write(const Fields& fields) {
    std::vector<std::string> parts;
    for (const auto& [key, value] : fields) parts.push_back(absl::StrCat("\"", key, "\": ", value));
    const std::string path = dir_.Sub(absl::StrCat("config", ++count_, ".json"));
    testing::WriteFile(path, absl::StrCat("{", absl::StrJoin(parts, ",\n"), "}"));
    return path;
  }

  absl::StatusOr<ModelConfig> Load(const Fields& fields) { return LoadModelConfig(Write(fields)); }

  testing::TempDir dir_;
  int count_ = 0;
};

TEST_F(ModelConfigTest, Qwen2HasQkvBiasesAndDerivesHeadDim) {
  absl::StatusOr<ModelConfig> c = Load(Qwen25Fields());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kQwen2);
  EXPECT_EQ(c->architecture_name, "Qwen2ForCausalLM");
  EXPECT_EQ(c->hidden_size, 896);
  EXPECT_EQ(c->intermediate_size, 4864);
  EXPECT_EQ(c->num_hidden_layers, 24);
  EXPECT_EQ(c->num_attention_heads, 14);
  EXPECT_EQ(c->num_key_value_heads, 2);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_EQ(c->max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->rope_scaling.type, "");
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  EXPECT_EQ(c->bos_token_id, 151643);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(151645));
}

TEST_F(ModelConfigTest, Qwen2BiasesDoNotDependOnAttentionBiasField) {
  Fields fields = Qwen25Fields();
  fields["attention_bias"] = "false";
  absl::StatusOr<ModelConfig> c = Load(fields);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->attention_bias);
}

TEST_F(ModelConfigTest, Qwen3HasQkNormAndExplicitHeadDim) {
  absl::StatusOr<ModelConfig> c = Load(Qwen3Fields());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kQwen3);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->max_position_embeddings, 40960);
  EXPECT_EQ(c->rope_scaling.type, "");
}

TEST_F(ModelConfigTest, Qwen3AttentionBiasComesFromConfig) {
  Fields fields = Qwen3Fields();
  fields["attention_bias"] = "true";
  absl::StatusOr<ModelConfig> with = Load(fields);
  fields.erase("attention_bias");
  absl::StatusOr<ModelConfig> without = Load(fields);
  ASSERT_TRUE(with.ok() && without.ok()) << with.status() << without.status();
  EXPECT_TRUE(with->attention_bias);
  EXPECT_FALSE(without->attention_bias);
}

TEST_F(ModelConfigTest, LlamaReadsLlama3RopeScalingAndEosList) {
  absl::StatusOr<ModelConfig> c = Load(Llama32Fields());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kLlama);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c->rope_theta, 5e5);
  EXPECT_EQ(c->rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c->bos_token_id, 128000);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(128001, 128008, 128009));
  EXPECT_EQ(c->torch_dtype, "");
}

TEST_F(ModelConfigTest, LlamaAcceptsTheOldTypeKeyAndDtypeKey) {
  Fields fields = Llama32Fields();
  fields["rope_scaling"] = R"({"type": "llama3", "factor": 8.0, "low_freq_factor": 2.0,
                               "high_freq_factor": 3.0, "original_max_position_embeddings": 4096})";
  fields["dtype"] = R"("float16")";
  absl::StatusOr<ModelConfig> c = Load(fields);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling.low_freq_factor, 2.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling.high_freq_factor, 3.0);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(c->torch_dtype, "float16");
}

TEST_F(ModelConfigTest, LlamaAttentionBiasComesFromConfig) {
  Fields fields = Llama32Fields();
  fields["attention_bias"] = "true";
  absl::StatusOr<ModelConfig> c = Load(fields);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->attention_bias);
}

TEST_F(ModelConfigTest, OptionalFieldsTakeTransformersDefaults) {
  absl::StatusOr<ModelConfig> c = Load({{"architectures", R"(["LlamaForCausalLM"])"},
                                        {"hidden_size", "256"},
                                        {"intermediate_size", "512"},
                                        {"num_hidden_layers", "2"},
                                        {"num_attention_heads", "8"},
                                        {"vocab_size", "1000"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->rope_scaling.type, "");
  EXPECT_EQ(c->bos_token_id, -1);
  EXPECT_TRUE(c->eos_token_ids.empty());
}

TEST_F(ModelConfigTest, DefaultRopeTypeMeansNoScaling) {
  Fields fields = Qwen3Fields();
  fields["rope_scaling"] = R"({"rope_type": "default"})";
  absl::StatusOr<ModelConfig> c = Load(fields);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.type, "");
}

TEST_F(ModelConfigTest, UnsupportedArchitectureNamesFileAndArchitecture) {
  Fields fields = Llama32Fields();
  fields["architectures"] = R"(["MistralForCausalLM"])";
  const std::string path = Write(fields);
  absl::StatusOr<ModelConfig> c = LoadModelConfig(path);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), AllOf(HasSubstr(path), HasSubstr("MistralForCausalLM")));
}

TEST_F(ModelConfigTest, EveryMissingRequiredFieldIsNamed) {
  for (const char* field : {"architectures", "vocab_size", "hidden_size", "intermediate_size",
                            "num_hidden_layers", "num_attention_heads"}) {
    Fields fields = Qwen25Fields();
    fields.erase(field);
    const std::string path = Write(fields);
    absl::StatusOr<ModelConfig> c = LoadModelConfig(path);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(c.status().message(),
                AllOf(HasSubstr(path), HasSubstr(absl::StrCat("\"", field, "\" is missing"))));
  }
}

TEST_F(ModelConfigTest, OtherRopeTypesAreUnimplemented) {
  for (const char* scaling :
       {R"({"type": "yarn", "factor": 4.0})", R"({"rope_type": "linear", "factor": 2.0})"}) {
    Fields fields = Qwen25Fields();
    fields["rope_scaling"] = scaling;
    const std::string path = Write(fields);
    absl::StatusOr<ModelConfig> c = LoadModelConfig(path);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented) << scaling;
    EXPECT_THAT(c.status().message(), AllOf(HasSubstr(path), HasSubstr("rope_scaling type")));
  }
}

TEST_F(ModelConfigTest, Llama3ScalingWithoutFactorNamesIt) {
  Fields fields = Llama32Fields();
  fields["rope_scaling"] = R"({"rope_type": "llama3", "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})";
  absl::StatusOr<ModelConfig> c = Load(fields);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("rope_scaling: field \"factor\" is missing"));
}

TEST_F(ModelConfigTest, BadValuesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {{"hidden_size", "64.5"},
                                                       {"num_key_value_heads", "3"},
                                                       {"eos_token_id", R"("<eos>")"},
                                                       {"num_hidden_layers", "0"},
                                                       {"tie_word_embeddings", R"("yes")"}};
  for (const auto& [field, value] : cases) {
    Fields fields = Qwen25Fields();
    fields[field] = value;
    absl::StatusOr<ModelConfig> c = Load(fields);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(c.status().message(), HasSubstr(absl::StrCat("\"", field, "\""))) << field;
  }
}

TEST_F(ModelConfigTest, SlidingWindowAndOtherActivationsAreUnimplemented) {
  Fields window = Qwen25Fields();
  window["use_sliding_window"] = "true";
  EXPECT_EQ(Load(window).status().code(), absl::StatusCode::kUnimplemented);
  Fields act = Qwen25Fields();
  act["hidden_act"] = R"("gelu")";
  absl::StatusOr<ModelConfig> c = Load(act);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(c.status().message(), HasSubstr("gelu"));
}

TEST_F(ModelConfigTest, MissingFileIsNotFoundAndBadJsonNamesTheFile) {
  const std::string missing = dir_.Sub("nope/config.json");
  absl::StatusOr<ModelConfig> c = LoadModelConfig(missing);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr(missing));

  const std::string bad = dir_.Sub("bad.json");
  testing::WriteFile(bad, R"({"architectures": ["Qwen2ForCausalLM"], )");
  c = LoadModelConfig(bad);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), AllOf(HasSubstr(bad), HasSubstr("malformed JSON")));
}

}  // namespace
}  // namespace kforge
