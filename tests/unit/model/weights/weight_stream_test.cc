// Weights streamed as WeightChunks from one decoder into another: after
// Apply the two compute the same logits, at any chunk size and across
// dtypes; a broken stream is refused by tensor name and leaves the target
// model as it was.
#include "model/weights/weight_stream.h"

#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/transformer/decoder_model.h"
#include "model/transformer/random_weights.h"
#include "tests/support/tiny_decoder.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<DecoderModel> NewModel(uint64_t seed, at::ScalarType dtype = at::kFloat) {
  return testing::TinyDecoder(Architecture::kQwen2, seed, dtype);
}

at::Tensor Logits(const DecoderModel& model) { return testing::TinyLogits(model); }

std::vector<v1::WeightChunk> Chunks(DecoderModel* model, int64_t version, int64_t max_bytes) {
  auto chunker = WeightChunker::Create(model, version, max_bytes);
  EXPECT_TRUE(chunker.ok()) << chunker.status();
  std::vector<v1::WeightChunk> chunks;
  v1::WeightChunk chunk;
  while ((*chunker)->Next(&chunk)) chunks.push_back(chunk);
  return chunks;
}

class WeightStreamTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(WeightStreamTest, StreamedWeightsReproduceTheSourceModel) {
  std::unique_ptr<DecoderModel> source = NewModel(1), target = NewModel(2);
  ASSERT_GT((Logits(*source) - Logits(*target)).abs().max().item<double>(), 1e-3);
  const std::vector<v1::WeightChunk> chunks = Chunks(source.get(), 7, GetParam());
  ASSERT_FALSE(chunks.empty());
  EXPECT_TRUE(chunks.back().last());
  for (size_t i = 0; i + 1 < chunks.size(); ++i) EXPECT_FALSE(chunks[i].last());
  for (const v1::WeightChunk& c : chunks) EXPECT_LE(static_cast<int64_t>(c.data().size()), GetParam());
  auto assembler = WeightAssembler::Create(target.get());
  for (const v1::WeightChunk& c : chunks) ASSERT_TRUE((*assembler)->Add(c).ok());
  absl::StatusOr<int64_t> version = (*assembler)->Apply();
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 7);
  EXPECT_EQ((Logits(*source) - Logits(*target)).abs().max().item<double>(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(ChunkSizes, WeightStreamTest, ::testing::Values(1000, 4096, 1 << 22));

TEST(WeightStreamDtypeTest, Fp32StreamIsConvertedIntoABf16Model) {
  std::unique_ptr<DecoderModel> source = NewModel(1), target = NewModel(2, at::kBFloat16);
  auto assembler = WeightAssembler::Create(target.get());
  for (const v1::WeightChunk& c : Chunks(source.get(), 1, 1 << 20)) {
    ASSERT_TRUE((*assembler)->Add(c).ok());
  }
  ASSERT_TRUE((*assembler)->Apply().ok());
  std::unique_ptr<DecoderModel> expected = NewModel(1, at::kBFloat16);
  EXPECT_EQ((Logits(*expected) - Logits(*target)).abs().max().item<double>(), 0.0);
}

TEST(WeightStreamErrorsTest, BrokenStreamsAreRefusedByNameAndLeaveTheModelAlone) {
  std::unique_ptr<DecoderModel> source = NewModel(1), target = NewModel(2);
  const at::Tensor before = Logits(*target);
  const std::vector<v1::WeightChunk> chunks = Chunks(source.get(), 3, 1000);
  ASSERT_GT(chunks.size(), 3u);
  auto fresh = [&] { return *WeightAssembler::Create(target.get()); };

  v1::WeightChunk unknown = chunks[0];
  unknown.set_name("model.layers.99.mlp.up_proj.weight");
  EXPECT_THAT(fresh()->Add(unknown).message(), HasSubstr("layers.99"));

  v1::WeightChunk bad_shape = chunks[0];
  bad_shape.set_shape(0, 3);
  EXPECT_THAT(fresh()->Add(bad_shape).message(), HasSubstr("shape [3"));

  v1::WeightChunk bad_dtype = chunks[0];
  bad_dtype.set_dtype("int8");
  EXPECT_THAT(fresh()->Add(bad_dtype).message(), HasSubstr("int8"));

  auto skipping = fresh();
  ASSERT_TRUE(skipping->Add(chunks[0]).ok());
  ASSERT_EQ(chunks[2].name(), chunks[0].name());  // the embedding spans several chunks
  EXPECT_THAT(skipping->Add(chunks[2]).message(), HasSubstr("expected offset 1000"));

  auto mixed = fresh();
  ASSERT_TRUE(mixed->Add(chunks[0]).ok());
  v1::WeightChunk other_version = chunks[1];
  other_version.set_version(4);
  EXPECT_THAT(mixed->Add(other_version).message(), HasSubstr("began with 3"));

  auto truncated = fresh();
  for (size_t i = 0; i + 1 < chunks.size(); ++i) ASSERT_TRUE(truncated->Add(chunks[i]).ok());
  EXPECT_THAT(truncated->Apply().status().message(), HasSubstr("before its last chunk"));

  auto missing = fresh();
  for (const v1::WeightChunk& c : chunks) {
    if (c.name() != chunks[0].name()) {
      ASSERT_TRUE(missing->Add(c).ok());
    }
  }
  const absl::Status incomplete = missing->Apply().status();
  EXPECT_EQ(incomplete.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(incomplete.message(), HasSubstr(chunks[0].name()));

  EXPECT_EQ((Logits(*target) - before).abs().max().item<double>(), 0.0);
}

}  // namespace
}  // namespace kforge
