// A TinyDecoderConfig decoder with random weights, and its logits on a fixed
// prompt: what tests of moving weights between models compare.
//
//   std::unique_ptr<DecoderModel> a = testing::TinyDecoder(Architecture::kQwen2, /*seed=*/1);
//   EXPECT_TRUE(at::equal(testing::TinyLogits(*a), testing::TinyLogits(*b)));
#ifndef KFORGE_TESTS_SUPPORT_TINY_DECODER_H_
#define KFORGE_TESTS_SUPPORT_TINY_DECODER_H_

#include <memory>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "model/transformer/decoder_model.h"
#include "model/transformer/random_weights.h"

namespace kforge::testing {

inline std::unique_ptr<DecoderModel> TinyDecoder(Architecture architecture, uint64_t seed,
                                                 at::ScalarType dtype = at::kFloat,
                                                 at::Device device = at::kCPU) {
  const ModelConfig config = TinyDecoderConfig(architecture);
  auto model = DecoderModel::Create(config, TensorMapSource(*RandomDecoderWeights(config, seed)),
                                    {device, dtype});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// float32 logits on the CPU for the prompt 1, 5, 9, 3.
inline at::Tensor TinyLogits(const DecoderModel& model) {
  return model.Forward(at::tensor({1, 5, 9, 3}, at::kLong).unsqueeze(0))->to(at::kFloat).cpu();
}

}  // namespace kforge::testing

#endif  // KFORGE_TESTS_SUPPORT_TINY_DECODER_H_
