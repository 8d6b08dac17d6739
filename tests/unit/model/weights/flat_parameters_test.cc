// Parameters re-homed into flat buffers: the model computes what it did,
// every parameter (a tied lm_head once) lives inside the buffer, and bytes
// written into the buffer are the model's new weights, which is how an NCCL
// broadcast lands on a rollout worker. Also: the gRPC path still works on a
// flattened model, since it copies into the same tensors.
#include "model/weights/flat_parameters.h"

#include <cstring>
#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "model/transformer/decoder_model.h"
#include "model/transformer/random_weights.h"
#include "model/weights/weight_stream.h"
#include "tests/support/tiny_decoder.h"

namespace kforge {
namespace {

std::unique_ptr<DecoderModel> NewModel(Architecture architecture, uint64_t seed,
                                       at::ScalarType dtype = at::kFloat) {
  return testing::TinyDecoder(architecture, seed, dtype);
}

at::Tensor Logits(const DecoderModel& model) { return testing::TinyLogits(model); }

int64_t ParameterBytes(DecoderModel* model) {
  int64_t bytes = 0;
  for (const auto& [name, tensor] : model->NamedParameters()) bytes += tensor.nbytes();
  return bytes;
}

class FlatParametersTest : public ::testing::TestWithParam<Architecture> {};

TEST_P(FlatParametersTest, TheModelComputesTheSameAndEveryParameterLivesInTheBuffer) {
  std::unique_ptr<DecoderModel> model = NewModel(GetParam(), 1);
  const at::Tensor before = Logits(*model);
  absl::StatusOr<std::unique_ptr<FlatParameters>> flat = FlatParameters::Create(model.get());
  ASSERT_TRUE(flat.ok()) << flat.status();
  ASSERT_EQ((*flat)->buffers().size(), 1u);
  const FlatParameters::Buffer& buffer = (*flat)->buffers()[0];
  EXPECT_EQ(buffer.dtype, "fp32");
  EXPECT_EQ((*flat)->device_index(), -1);
  EXPECT_THAT((*flat)->Layout(), ::testing::StartsWith(absl::StrCat("fp32:", buffer.bytes, "@")));
  // Aligned pieces: at least the parameters, at most 256 bytes more each.
  const auto named = model->NamedParameters();
  EXPECT_GE(buffer.bytes, ParameterBytes(model.get()));
  EXPECT_LE(buffer.bytes, ParameterBytes(model.get()) + 256 * static_cast<int64_t>(named.size()));
  // Each starts on a 256-byte boundary, or right after the one before it
  // when the two were back to back (the stacked q/k/v and gate/up).
  const char* begin = static_cast<const char*>(buffer.data);
  const char* previous_end = nullptr;
  for (const auto& [name, tensor] : named) {
    const char* data = static_cast<const char*>(tensor.data_ptr());
    EXPECT_TRUE(data >= begin && data + tensor.nbytes() <= begin + buffer.bytes) << name;
    const bool stacked = name.find("k_proj") != std::string::npos ||
                         name.find("v_proj") != std::string::npos ||
                         name.find("up_proj") != std::string::npos;
    if (stacked) {
      EXPECT_EQ(data, previous_end) << name << " no longer follows the part before it";
    } else if (data != previous_end) {
      EXPECT_EQ((data - begin) % 256, 0) << name;
    }
    previous_end = data + tensor.nbytes();
  }
  EXPECT_TRUE(at::equal(Logits(*model), before));
}

TEST_P(FlatParametersTest, BytesWrittenIntoTheBufferAreTheModelsNewWeights) {
  std::unique_ptr<DecoderModel> source = NewModel(GetParam(), 1), target = NewModel(GetParam(), 2);
  ASSERT_GT((Logits(*source) - Logits(*target)).abs().max().item<double>(), 1e-3);
  auto from = FlatParameters::Create(source.get());
  auto to = FlatParameters::Create(target.get());
  ASSERT_TRUE(from.ok() && to.ok());
  ASSERT_EQ((*from)->Layout(), (*to)->Layout());
  for (size_t i = 0; i < (*from)->buffers().size(); ++i) {
    std::memcpy((*to)->buffers()[i].data, (*from)->buffers()[i].data, (*from)->buffers()[i].bytes);
  }
  EXPECT_TRUE(at::equal(Logits(*target), Logits(*source)));
}

TEST_P(FlatParametersTest, StreamedWeightsStillApplyToAFlattenedModel) {
  std::unique_ptr<DecoderModel> source = NewModel(GetParam(), 1), target = NewModel(GetParam(), 2);
  auto flat = FlatParameters::Create(target.get());
  ASSERT_TRUE(flat.ok());
  auto chunker = WeightChunker::Create(source.get(), 3, 1 << 12);
  auto assembler = WeightAssembler::Create(target.get());
  ASSERT_TRUE(chunker.ok() && assembler.ok());
  v1::WeightChunk chunk;
  while ((*chunker)->Next(&chunk)) ASSERT_TRUE((*assembler)->Add(chunk).ok());
  ASSERT_TRUE((*assembler)->Apply().ok());
  EXPECT_TRUE(at::equal(Logits(*target), Logits(*source)));
  // The stream wrote into the flat storage, not beside it.
  for (const auto& [name, tensor] : target->NamedParameters()) {
    const char* data = static_cast<const char*>(tensor.data_ptr());
    const char* begin = static_cast<const char*>((*flat)->buffers()[0].data);
    EXPECT_TRUE(data >= begin && data < begin + (*flat)->buffers()[0].bytes) << name;
  }
}

TEST_P(FlatParametersTest, AnOptimiserStepLandsInTheBuffer) {
  // The learner's send path: autograd and in-place updates on re-homed
  // parameters (what AdamW does) change the bytes the broadcast sends.
  std::unique_ptr<DecoderModel> model = NewModel(GetParam(), 1);
  auto flat = FlatParameters::Create(model.get());
  ASSERT_TRUE(flat.ok());
  const FlatParameters::Buffer& buffer = (*flat)->buffers()[0];
  const at::Tensor before =
      at::from_blob(buffer.data, {buffer.bytes / 4}, at::kFloat).clone();
  std::vector<at::Tensor> params;
  for (auto& [name, tensor] : model->NamedParameters()) {
    tensor.set_requires_grad(true);
    params.push_back(tensor);
  }
  Logits(*model).pow(2).mean().backward();
  {
    c10::NoGradGuard no_grad;
    for (at::Tensor& p : params) {
      ASSERT_TRUE(p.grad().defined());
      p.sub_(p.grad(), 0.1);
    }
  }
  const at::Tensor after = at::from_blob(buffer.data, {buffer.bytes / 4}, at::kFloat);
  EXPECT_FALSE(at::equal(after, before));
  // And the model computes with what the buffer holds.
  std::unique_ptr<DecoderModel> copy = NewModel(GetParam(), 2);
  auto copy_flat = FlatParameters::Create(copy.get());
  std::memcpy((*copy_flat)->buffers()[0].data, buffer.data, buffer.bytes);
  c10::NoGradGuard no_grad;
  EXPECT_TRUE(at::equal(Logits(*copy), Logits(*model)));
}

INSTANTIATE_TEST_SUITE_P(Architectures, FlatParametersTest,
                         ::testing::Values(Architecture::kLlama, Architecture::kQwen2,
                                           Architecture::kQwen3));

TEST(FlatParametersSnapshotTest, APinnedSnapshotOfGpuBuffersStreamsWhatAPerTensorOneDoes) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU (the pinned path is for GPU buffers)";
  std::unique_ptr<DecoderModel> model =
      testing::TinyDecoder(Architecture::kQwen3, 4, at::kBFloat16, at::Device(at::kCUDA, 0));
  ASSERT_NE(model, nullptr);
  auto flat = FlatParameters::Create(model.get());
  ASSERT_TRUE(flat.ok()) << flat.status();
  auto per_tensor = WeightSnapshot::Capture(model.get(), "job", 3);
  auto pinned = WeightSnapshot::Capture(model.get(), "job", 3, flat->get());
  ASSERT_TRUE(per_tensor.ok() && pinned.ok());
  EXPECT_EQ((*pinned)->bytes(), (*flat)->bytes());
  auto a = WeightChunker::Create(*per_tensor, 1000);
  auto b = WeightChunker::Create(*pinned, 1000);
  ASSERT_TRUE(a.ok() && b.ok());
  v1::WeightChunk x, y;
  int chunks = 0;
  while ((*a)->Next(&x)) {
    ASSERT_TRUE((*b)->Next(&y));
    EXPECT_EQ(x.name(), y.name());
    EXPECT_EQ(x.data(), y.data()) << x.name() << " at " << x.offset();
    ++chunks;
  }
  EXPECT_FALSE((*b)->Next(&y));
  EXPECT_GT(chunks, 10);
}

TEST(FlatParametersLayoutTest, ModelsOfOtherDtypesHaveOtherLayouts) {
  std::unique_ptr<DecoderModel> fp32 = NewModel(Architecture::kQwen2, 1, at::kFloat);
  std::unique_ptr<DecoderModel> bf16 = NewModel(Architecture::kQwen2, 1, at::kBFloat16);
  auto a = FlatParameters::Create(fp32.get());
  auto b = FlatParameters::Create(bf16.get());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->Layout(), (*b)->Layout());
  EXPECT_EQ((*b)->buffers()[0].dtype, "bf16");
}

}  // namespace
}  // namespace kforge
