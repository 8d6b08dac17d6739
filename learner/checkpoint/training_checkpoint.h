// A job's checkpoints: the policy as a Hugging Face folder that
// transformers, vLLM and `kforge-rollout --model` load as they are, plus what
// the learner needs to resume exactly (optimizer state, trainer state).
//
//   <job_dir>/checkpoints/step-00000120/
//     config.json, generation_config.json, tokenizer.json, tokenizer_config.json
//     model.safetensors                       (or model-0000K-of-0000N.safetensors
//                                              + model.safetensors.index.json, as
//                                              transformers shards, by max_shard_bytes)
//     optimizer.safetensors                   AdamW moments and fp32 master weights
//     trainer_state.json                      kforge.v1.TrainerState
//
//   KF_ASSIGN_OR_RETURN(std::string dir, WriteTrainingCheckpoint(
//       {.job_dir = job_dir, .source_model_dir = spec.model_path(), .spec = spec.checkpoint()},
//       *policy, trainer->optimizer(), state));
//   KF_ASSIGN_OR_RETURN(std::optional<std::string> latest, LatestCheckpoint(job_dir));
//
// A checkpoint is written into "<name>.partial" and renamed when complete, so
// a learner killed mid-write leaves the previous checkpoint as the latest;
// only the newest keep_last complete checkpoints are kept.
#ifndef KFORGE_LEARNER_CHECKPOINT_TRAINING_CHECKPOINT_H_
#define KFORGE_LEARNER_CHECKPOINT_TRAINING_CHECKPOINT_H_

#include <filesystem>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kforge/v1/job.pb.h"
#include "kforge/v1/learner_state.pb.h"

namespace kforge {

class AdamW;
class DecoderModel;

struct CheckpointTarget {
  std::filesystem::path job_dir;
  // Where config.json and the tokenizer files are copied from: the job's
  // model folder, or the checkpoint it resumed from.
  std::filesystem::path source_model_dir;
  v1::CheckpointSpec spec;  // defaults applied
};

// Returns the checkpoint's folder. Errors name the file that could not be
// written; nothing partial is left as a complete checkpoint.
absl::StatusOr<std::string> WriteTrainingCheckpoint(const CheckpointTarget& target,
                                                    DecoderModel& policy, const AdamW& optimizer,
                                                    const v1::TrainerState& state);

// The policy a job's KL term is measured against when its RL steps follow a
// warm start: the policy as the warm start left it, as a model folder
// (Hugging Face layout, no optimizer state) at <job_dir>/reference, written
// once when the RL steps begin, into "reference.partial" and renamed. It
// sits beside checkpoints/, so keep_last never prunes it and a resumed job
// measures against the same policy.
absl::StatusOr<std::string> WriteReferenceModel(const CheckpointTarget& target,
                                                DecoderModel& model);

// That folder, or nullopt when the job has not written one.
std::optional<std::string> ReferenceModel(const std::filesystem::path& job_dir);

// The newest complete checkpoint of a job, or nullopt when it has none.
absl::StatusOr<std::optional<std::string>> LatestCheckpoint(const std::filesystem::path& job_dir);

absl::StatusOr<v1::TrainerState> ReadTrainerState(const std::filesystem::path& checkpoint_dir);

// Restores optimizer.safetensors into `optimizer` (created over the model
// loaded from the same checkpoint).
absl::Status LoadOptimizerState(const std::filesystem::path& checkpoint_dir,
                                const v1::TrainerState& state, AdamW& optimizer);

}  // namespace kforge

#endif  // KFORGE_LEARNER_CHECKPOINT_TRAINING_CHECKPOINT_H_
