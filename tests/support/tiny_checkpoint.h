// A `kforge tiny-model` checkpoint in a scratch folder, for tests that need a
// real model folder (config.json, safetensors, tokenizer.json) to load.
//
//   static std::unique_ptr<ScratchDir> dir = WriteTinyCheckpoint();
//   LoadDecoderModel(dir->Sub("model"), {});
#ifndef KFORGE_TESTS_SUPPORT_TINY_CHECKPOINT_H_
#define KFORGE_TESTS_SUPPORT_TINY_CHECKPOINT_H_

#include <cstdint>
#include <filesystem>
#include <memory>

#include <gtest/gtest.h>

#include "model/checkpoint/tiny_model.h"
#include "tests/support/scratch_dir.h"

namespace kforge::testing {

// The checkpoint is in the returned folder's "model" subfolder; its
// tokenizer is trained on the repository's built-in tasks.
inline std::unique_ptr<ScratchDir> WriteTinyCheckpoint(
    Architecture architecture = Architecture::kQwen2, uint64_t seed = 0) {
  auto dir = std::make_unique<ScratchDir>();
  TinyModelOptions options;
  options.out_dir = dir->Sub("model");
  options.architecture = architecture;
  options.seed = seed;
  options.tasks_dir = std::filesystem::path(KFORGE_TEST_SOURCE_DIR) / "tasks/kforge-mini";
  options.max_merges = 100;
  absl::StatusOr<ModelConfig> written = WriteTinyModel(options);
  EXPECT_TRUE(written.ok()) << written.status();
  return dir;
}

// A test suite sharing one tiny checkpoint, written when the suite starts
// and removed when it ends:
//   class GeneratorTest : public testing::TinyCheckpointSuite<Architecture::kQwen2, 5> {};
//   LoadDecoderModel(dir_->Sub("model"), {});
template <Architecture kArchitecture, uint64_t kSeed>
class TinyCheckpointSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = WriteTinyCheckpoint(kArchitecture, kSeed); }
  static void TearDownTestSuite() { dir_.reset(); }

  static inline std::unique_ptr<ScratchDir> dir_;
};

}  // namespace kforge::testing

#endif  // KFORGE_TESTS_SUPPORT_TINY_CHECKPOINT_H_
