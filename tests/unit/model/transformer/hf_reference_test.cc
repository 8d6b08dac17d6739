// The decoder against transformers itself. scripts/hf_reference_logits.py
// (run where transformers is installed) writes, for a checkpoint and a
// prompt, transformers' float32 logits and greedy continuation as JSON; this
// test loads the same checkpoint and compares, through Forward and through
// the KV cache. Set KFORGE_HF_REFERENCE_DIR to the folder of those JSON files;
// KFORGE_HF_REFERENCE_DEVICE (cpu, cuda; default cuda when available) and
// KFORGE_HF_REFERENCE_DTYPE (float32, bfloat16, float16; default float32)
// choose how the decoder runs. Skipped, saying so, when the folder is unset.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include "common/config/json_config.h"
#include "model/transformer/checkpoint_loader.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using ::google::protobuf::Struct;
using ::google::protobuf::Value;

struct Reference {
  fs::path checkpoint;
  std::vector<int64_t> prompt;
  int64_t prompt_logits_start = 0;
  at::Tensor prompt_logits;  // [rows, V]: positions prompt_logits_start..T-1
  std::vector<int64_t> greedy_tokens;
  at::Tensor greedy_logits;  // [N, V]: row i chose greedy_tokens[i]
};

const Value& Field(const Struct& root, const std::string& name) {
  static const Value kNull;
  auto it = root.fields().find(name);
  EXPECT_NE(it, root.fields().end()) << "reference JSON has no \"" << name << "\"";
  return it == root.fields().end() ? kNull : it->second;
}

std::vector<int64_t> Ints(const Value& list) {
  std::vector<int64_t> out;
  for (const Value& v : list.list_value().values()) out.push_back(static_cast<int64_t>(v.number_value()));
  return out;
}

at::Tensor Rows(const Value& rows) {
  std::vector<at::Tensor> out;
  for (const Value& row : rows.list_value().values()) {
    std::vector<float> values;
    for (const Value& v : row.list_value().values()) values.push_back(static_cast<float>(v.number_value()));
    out.push_back(at::tensor(values, at::kFloat));
  }
  return at::stack(out);
}

Reference ReadReference(const fs::path& file) {
  absl::StatusOr<std::string> text = ReadFileToString(file.string());
  EXPECT_TRUE(text.ok()) << text.status();
  Struct root;
  const absl::Status parsed = ParseJsonMessage(text.value_or("{}"), &root);
  EXPECT_TRUE(parsed.ok()) << parsed;
  Reference r;
  r.checkpoint = Field(root, "checkpoint").string_value();
  if (r.checkpoint.is_relative()) r.checkpoint = file.parent_path() / r.checkpoint;
  r.prompt = Ints(Field(root, "prompt"));
  r.prompt_logits_start = static_cast<int64_t>(Field(root, "prompt_logits_start").number_value());
  r.prompt_logits = Rows(Field(root, "prompt_logits"));
  r.greedy_tokens = Ints(Field(root, "greedy_tokens"));
  r.greedy_logits = Rows(Field(root, "greedy_logits"));
  return r;
}

DecoderOptions OptionsFromEnvironment() {
  DecoderOptions options;
  const char* device = std::getenv("KFORGE_HF_REFERENCE_DEVICE");
  const std::string wanted = device != nullptr ? device : (at::hasCUDA() ? "cuda" : "cpu");
  options.device = at::Device(wanted);
  const char* dtype = std::getenv("KFORGE_HF_REFERENCE_DTYPE");
  const std::string name = dtype != nullptr ? dtype : "float32";
  options.dtype = name == "bfloat16" ? at::kBFloat16 : name == "float16" ? at::kHalf : at::kFloat;
  return options;
}

// float32 agrees with transformers to rounding; half precision to its own.
void ExpectLogitsClose(const at::Tensor& actual, const at::Tensor& expected, at::ScalarType dtype,
                       const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const at::Tensor a = actual.to(at::kCPU, at::kFloat);
  const double scale = std::max(1.0, expected.abs().max().item<double>());
  const double tolerance = (dtype == at::kFloat ? 1e-3 : 5e-2) * scale;
  const at::Tensor diff = (a - expected).abs();
  EXPECT_LE(diff.max().item<double>(), tolerance)
      << what << ": worst logit differs by " << diff.max().item<double>() << " at flat index "
      << diff.argmax().item<int64_t>() << " (scale " << scale << ")";
}

void CompareWithReference(const Reference& ref, const DecoderOptions& options) {
  absl::StatusOr<std::unique_ptr<DecoderModel>> model = LoadDecoderModel(ref.checkpoint, options);
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t prompt_len = static_cast<int64_t>(ref.prompt.size());
  const int64_t steps = static_cast<int64_t>(ref.greedy_tokens.size());
  ASSERT_GE(steps, 1) << "the reference has no greedy tokens";
  // Forward over prompt + all but the last greedy token covers every row.
  std::vector<int64_t> sequence = ref.prompt;
  sequence.insert(sequence.end(), ref.greedy_tokens.begin(), ref.greedy_tokens.end() - 1);
  absl::StatusOr<at::Tensor> logits =
      (*model)->Forward(at::tensor(sequence, at::kLong).unsqueeze(0));
  ASSERT_TRUE(logits.ok()) << logits.status();
  const at::Tensor rows = (*logits)[0];
  ExpectLogitsClose(rows.narrow(0, ref.prompt_logits_start, prompt_len - ref.prompt_logits_start),
                    ref.prompt_logits, options.dtype, "forward, prompt positions");
  ExpectLogitsClose(rows.narrow(0, prompt_len - 1, steps), ref.greedy_logits, options.dtype,
                    "forward, greedy positions");

  // The cached path, teacher-forced on transformers' tokens, in two forked slots.
  std::unique_ptr<KvCache> cache = *(*model)->NewKvCache(2, prompt_len + steps);
  const int64_t slot = *cache->Allocate();
  absl::StatusOr<at::Tensor> next = (*model)->Prefill(cache.get(), slot, ref.prompt);
  ASSERT_TRUE(next.ok()) << next.status();
  const std::vector<int64_t> slots = {slot, cache->Fork(slot, 1)->at(0)};
  at::Tensor step_logits = next->unsqueeze(0).expand({2, -1});
  for (int64_t i = 0; i < steps; ++i) {
    ExpectLogitsClose(step_logits[0], ref.greedy_logits[i], options.dtype,
                      "cached step " + std::to_string(i));
    EXPECT_TRUE(step_logits[0].equal(step_logits[1])) << "forked slots differ at step " << i;
    if (options.dtype == at::kFloat) {
      EXPECT_EQ(step_logits[0].argmax().item<int64_t>(), ref.greedy_tokens[i]) << "step " << i;
    }
    if (i + 1 == steps) break;
    const int64_t token = ref.greedy_tokens[i];
    absl::StatusOr<at::Tensor> decoded = (*model)->DecodeStep(cache.get(), slots, {token, token});
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    step_logits = *decoded;
  }
}

TEST(HfReferenceTest, LogitsAndGreedyTokensMatchTransformers) {
  const char* dir = std::getenv("KFORGE_HF_REFERENCE_DIR");
  if (dir == nullptr || *dir == '\0') {
    GTEST_SKIP() << "KFORGE_HF_REFERENCE_DIR is unset: write references with "
                    "scripts/hf_reference_logits.py (needs transformers) and point it there";
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  ASSERT_FALSE(files.empty()) << "no *.json in KFORGE_HF_REFERENCE_DIR=" << dir;
  const DecoderOptions options = OptionsFromEnvironment();
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string() + " on " + options.device.str() + " " +
                 std::string(c10::toString(options.dtype)));
    CompareWithReference(ReadReference(file), options);
  }
}

}  // namespace
}  // namespace kforge
