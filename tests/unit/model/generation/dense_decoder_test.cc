// DenseDecoder: the graph shapes a step replays; rows whose token is named on
// the device take it; and, on a CUDA device, that decode steps replayed from
// CUDA graphs generate exactly what eager steps generate (skipped with a
// reason where LibTorch has no CUDA device).
#include "model/generation/dense_decoder.h"

#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include "model/generation/generator.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/transformer/checkpoint_loader.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/kv_cache.h"
#include "tests/support/tiny_checkpoint.h"

namespace kforge {
namespace {

class DenseDecoderTest : public testing::TinyCheckpointSuite<Architecture::kQwen2, 3> {
 protected:
  std::unique_ptr<DecoderModel> Load(const DecoderOptions& options) {
    absl::StatusOr<std::unique_ptr<DecoderModel>> model =
        LoadDecoderModel(dir_->Sub("model"), options);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }
};

TEST_F(DenseDecoderTest, StepsRoundUpToBatchAndSpanBuckets) {
  std::unique_ptr<DecoderModel> model = Load({});
  ASSERT_NE(model, nullptr);
  std::unique_ptr<KvCache> cache = *model->NewKvCache(/*slots=*/40, /*max_len=*/1000);
  std::unique_ptr<DenseDecoder> decoder =
      *DenseDecoder::Create(model.get(), cache.get(), {.span_bucket = 256});
  using Shape = std::pair<int64_t, int64_t>;
  EXPECT_EQ(decoder->GraphShape(1, 0), Shape(1, 256));
  EXPECT_EQ(decoder->GraphShape(3, 255), Shape(4, 256));
  EXPECT_EQ(decoder->GraphShape(3, 256), Shape(4, 512));
  EXPECT_EQ(decoder->GraphShape(8, 10), Shape(8, 256));
  EXPECT_EQ(decoder->GraphShape(9, 10), Shape(16, 256));
  EXPECT_EQ(decoder->GraphShape(33, 10), Shape(40, 256));    // at most the slots
  EXPECT_EQ(decoder->GraphShape(40, 998), Shape(40, 1000));  // at most max_len
  // On the CPU the steps run eagerly, and say why.
  EXPECT_EQ(decoder->stats().graphs_off, "not a CUDA device");
  EXPECT_FALSE(DenseDecoder::Create(model.get(), cache.get(), {.span_bucket = 0}).ok());
}

TEST_F(DenseDecoderTest, RowsNamingDeviceTokensTakeThemInsteadOfTheHostsTokens) {
  std::unique_ptr<DecoderModel> model = Load({});
  ASSERT_NE(model, nullptr);
  std::unique_ptr<KvCache> cache = *model->NewKvCache(/*slots=*/4, /*max_len=*/32);
  std::unique_ptr<DenseDecoder> decoder = *DenseDecoder::Create(model.get(), cache.get(), {});
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t slot = *cache->Allocate();
    ASSERT_TRUE(model->Prefill(cache.get(), slot, {5 + i, 9, 13 + i}).ok());
    positions.push_back(3);
  }
  // Nothing advances the cache: every run writes and reads the same positions.
  const at::Tensor expected = decoder->Run({21, 34, 55}, positions)->clone();
  using DeviceTokens = DenseDecoder::DeviceTokens;
  auto close = [&](const absl::StatusOr<at::Tensor>& logits) {
    EXPECT_TRUE(logits.ok()) << logits.status();
    return logits.ok() && at::allclose(*logits, expected, 1e-5, 1e-6);
  };
  const std::vector<int64_t> in_order = {0, 1, 2};
  const DeviceTokens steady{.ids = at::tensor({21, 34, 55, 99}, at::kLong), .rows = in_order};
  EXPECT_TRUE(close(decoder->Run({0, 0, 0}, positions, &steady)));
  // Row 1 from the host; rows 0 and 2 gathered out of order.
  const std::vector<int64_t> mixed = {2, -1, 0};
  const DeviceTokens gathered{.ids = at::tensor({55, 7, 21}, at::kLong), .rows = mixed};
  EXPECT_TRUE(close(decoder->Run({0, 34, 0}, positions, &gathered)));
  const std::vector<int64_t> none = {-1, -1, -1};
  const DeviceTokens from_host{.ids = at::Tensor(), .rows = none};
  EXPECT_TRUE(close(decoder->Run({21, 34, 55}, positions, &from_host)));
  // The comparison can fail: another token in one row gives other logits.
  EXPECT_FALSE(close(decoder->Run({21, 34, 56}, positions)));

  const std::vector<int64_t> two = {0, 1};
  const DeviceTokens short_rows{.ids = steady.ids, .rows = two};
  EXPECT_EQ(decoder->Run({0, 0, 0}, positions, &short_rows).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<int64_t> past_end = {0, 1, 4};
  const DeviceTokens out_of_range{.ids = steady.ids, .rows = past_end};
  EXPECT_EQ(decoder->Run({0, 0, 0}, positions, &out_of_range).status().code(),
            absl::StatusCode::kInvalidArgument);
  const DeviceTokens int32_ids{.ids = steady.ids.to(at::kInt), .rows = in_order};
  EXPECT_EQ(decoder->Run({0, 0, 0}, positions, &int32_ids).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(DenseDecoderTest, CudaGraphReplayGeneratesWhatEagerStepsGenerate) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this LibTorch build or machine";
  std::unique_ptr<DecoderModel> model = Load({.device = at::Device("cuda:0")});
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer =
      BpeTokenizer::FromFile(dir_->Sub("model/tokenizer.json"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto run = [&](bool graphs, int64_t max_graphs, GeneratorStats* stats) {
    // Small span buckets and uneven groups: several graphs, padding rows,
    // and sequences moved down as others finish.
    std::unique_ptr<Generator> gen = *Generator::Create(
        model.get(), tokenizer->get(),
        {.slots = 12,
         .max_len = 96,
         .decode = {.cuda_graphs = graphs, .span_bucket = 16, .max_graphs = max_graphs}});
    const std::vector<std::pair<std::string, int>> groups = {
        {"def relu(x):", 5}, {"import triton", 3}, {"return x * 2", 4}};
    int id = 0;
    for (const auto& [prompt, size] : groups) {
      GroupRequest request{.group_id = std::to_string(id++),
                           .prompt_tokens = (*tokenizer)->Encode(prompt)};
      for (int i = 0; i < size; ++i) {
        request.samples.push_back({.temperature = 1.0, .seed = static_cast<uint64_t>(10 * id + i)});
      }
      request.stop.max_new_tokens = 20 + 15 * id;
      EXPECT_TRUE(gen->Enqueue(std::move(request)).ok());
    }
    std::map<std::string, GeneratedSample> out;
    while (!gen->idle()) {
      absl::StatusOr<std::vector<GeneratedSample>> done = gen->Step();
      EXPECT_TRUE(done.ok()) << done.status();
      if (!done.ok()) break;
      for (GeneratedSample& s : *done) out[s.group_id + "/" + std::to_string(s.index)] = s;
    }
    *stats = gen->stats();
    return out;
  };
  GeneratorStats eager_stats, graph_stats, evicting_stats;
  const std::map<std::string, GeneratedSample> eager = run(false, 64, &eager_stats);
  const std::map<std::string, GeneratedSample> replayed = run(true, 64, &graph_stats);
  // One graph at a time: every new shape evicts the last graph.
  const std::map<std::string, GeneratedSample> evicting = run(true, 1, &evicting_stats);
  EXPECT_EQ(evicting_stats.decoder.graphs, 1);
  EXPECT_GT(evicting_stats.decoder.captures, graph_stats.decoder.captures - 1);
  ASSERT_EQ(evicting.size(), 12u);
  for (const auto& [key, sample] : eager) EXPECT_EQ(evicting.at(key).tokens, sample.tokens) << key;
  EXPECT_EQ(graph_stats.decoder.graphs_off, "");
  EXPECT_GT(graph_stats.decoder.captures, 2u);
  EXPECT_GT(graph_stats.decoder.replays, graph_stats.decoder.captures);
  EXPECT_EQ(graph_stats.decoder.eager_steps, 0u);
  EXPECT_GT(graph_stats.slot_moves, 0u);
  EXPECT_EQ(eager_stats.decoder.replays, 0u);
  ASSERT_EQ(eager.size(), 12u);
  ASSERT_EQ(replayed.size(), 12u);
  for (const auto& [key, sample] : eager) {
    const GeneratedSample& other = replayed.at(key);
    EXPECT_EQ(other.tokens, sample.tokens) << key;
    ASSERT_EQ(other.logprobs.size(), sample.logprobs.size()) << key;
    for (size_t i = 0; i < sample.logprobs.size(); ++i) {
      EXPECT_NEAR(other.logprobs[i], sample.logprobs[i], 1e-4) << key << " token " << i;
    }
  }
}

}  // namespace
}  // namespace kforge
