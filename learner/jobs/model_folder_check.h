// A quick check that a folder holds a Hugging Face checkpoint of a
// supported architecture, done before a job is accepted so the user hears
// about a wrong path at submission rather than minutes later.
//
//   KF_RETURN_IF_ERROR(CheckModelFolder("/models/qwen2.5-coder-1.5b"));
//   // INVALID_ARGUMENT: /models/x/config.json: architecture "GPT2LMHeadModel"
//   //   is not supported (supported: Qwen2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM)
#ifndef KFORGE_LEARNER_JOBS_MODEL_FOLDER_CHECK_H_
#define KFORGE_LEARNER_JOBS_MODEL_FOLDER_CHECK_H_

#include <string>

#include "absl/status/statusor.h"

namespace kforge {

struct ModelFolderInfo {
  std::string architecture;  // "Qwen2ForCausalLM"
  bool sharded = false;      // model.safetensors.index.json present
};

absl::StatusOr<ModelFolderInfo> CheckModelFolder(const std::string& path);

}  // namespace kforge

#endif  // KFORGE_LEARNER_JOBS_MODEL_FOLDER_CHECK_H_
