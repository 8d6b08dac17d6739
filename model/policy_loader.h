// Loads a policy from a Hugging Face folder: the decoder and its tokenizer,
// on the configured device and dtype. The rollout worker samples with it,
// the learner trains it. This header names no LibTorch type.
//
//   KF_ASSIGN_OR_RETURN(std::unique_ptr<LoadedPolicy> policy,
//                       LoadPolicy("/models/qwen", "cuda:0", "auto"));
//   RolloutEngine::Create(policy->model.get(), policy->tokenizer.get(), ...);
#ifndef KFORGE_MODEL_POLICY_LOADER_H_
#define KFORGE_MODEL_POLICY_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kforge {

class BpeTokenizer;
class DecoderModel;

struct LoadedPolicy {
  LoadedPolicy();
  ~LoadedPolicy();
  std::unique_ptr<DecoderModel> model;
  std::unique_ptr<BpeTokenizer> tokenizer;
  std::string description;  // "qwen2 2 layers, cpu float32", for the log
};

// device: "cpu", "cuda", "cuda:N"; dtype: "auto" (bfloat16 on a GPU,
// float32 on the CPU), "float32", "bfloat16", "float16". Errors name the
// folder, the file or the setting.
absl::StatusOr<std::unique_ptr<LoadedPolicy>> LoadPolicy(const std::string& model_path,
                                                         const std::string& device,
                                                         const std::string& dtype);

}  // namespace kforge

#endif  // KFORGE_MODEL_POLICY_LOADER_H_
