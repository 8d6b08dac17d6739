#include "learner/checkpoint/training_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"
#include "learner/training/adamw.h"
#include "model/checkpoint/safetensors.h"
#include "model/checkpoint/safetensors_writer.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/torch_status.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCheckpointsDir = "checkpoints";
constexpr const char* kPartialSuffix = ".partial";
constexpr const char* kTrainerStateFile = "trainer_state.json";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kReferenceDir = "reference";
// Files of a Hugging Face model folder that are not weights.
constexpr const char* kModelSideFiles[] = {"config.json", "generation_config.json",
                                           "tokenizer.json", "tokenizer_config.json",
                                           "special_tokens_map.json"};

absl::StatusOr<TensorDtype> SafetensorsDtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return TensorDtype::kF32;
    case at::kBFloat16: return TensorDtype::kBF16;
    case at::kHalf: return TensorDtype::kF16;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tensor dtype ", c10::toString(type), " cannot be checkpointed"));
  }
}

absl::StatusOr<TensorToWrite> ToWrite(const std::string& name, const at::Tensor& tensor) {
  KF_ASSIGN_OR_RETURN(TensorDtype dtype, SafetensorsDtype(tensor.scalar_type()));
  return TorchCall(absl::StrCat("copy ", name, " to the host"), [&] {
    const at::Tensor host = tensor.detach().to(at::kCPU).contiguous();
    TensorToWrite out{.name = name, .dtype = dtype,
                      .shape = std::vector<int64_t>(host.sizes().begin(), host.sizes().end())};
    out.data.resize(host.nbytes());
    std::memcpy(out.data.data(), host.data_ptr(), host.nbytes());
    return out;
  });
}

// Groups tensors into shards of at most max_bytes (a larger tensor gets a
// shard of its own), as transformers' save_pretrained does.
absl::Status WriteModelShards(const fs::path& dir,
                              const std::vector<std::pair<std::string, at::Tensor>>& params,
                              int64_t max_bytes) {
  std::vector<std::vector<size_t>> shards(1);
  int64_t filled = 0, total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t bytes = static_cast<int64_t>(params[i].second.nbytes());
    if (!shards.back().empty() && filled + bytes > max_bytes) {
      shards.emplace_back();
      filled = 0;
    }
    shards.back().push_back(i);
    filled += bytes;
    total += bytes;
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  if (shards.size() == 1) {
    std::vector<TensorToWrite> tensors;
    for (size_t i : shards[0]) {
      KF_ASSIGN_OR_RETURN(TensorToWrite t, ToWrite(params[i].first, params[i].second));
      tensors.push_back(std::move(t));
    }
    return WriteSafetensors(dir / "model.safetensors", tensors, metadata);
  }
  std::map<std::string, std::string> weight_map;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file =
        absl::StrFormat("model-%05d-of-%05d.safetensors", s + 1, shards.size());
    std::vector<TensorToWrite> tensors;
    for (size_t i : shards[s]) {
      KF_ASSIGN_OR_RETURN(TensorToWrite t, ToWrite(params[i].first, params[i].second));
      tensors.push_back(std::move(t));
      weight_map[params[i].first] = file;
    }
    KF_RETURN_IF_ERROR(WriteSafetensors(dir / file, tensors, metadata));
  }
  return WriteFileAtomically((dir / "model.safetensors.index.json").string(),
                             SafetensorsIndexJson(weight_map, static_cast<uint64_t>(total)));
}

absl::Status CopySideFiles(const fs::path& from, const fs::path& to) {
  for (const char* name : kModelSideFiles) {
    std::error_code ec;
    if (!fs::exists(from / name, ec)) continue;
    fs::copy_file(from / name, to / name, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot copy ", (from / name).string(), ": ", ec.message()));
    }
  }
  return absl::OkStatus();
}

// A model folder (side files and weights, then what `more` adds) written
// into "<final_dir>.partial" and renamed to final_dir once complete.
absl::Status WriteModelFolder(const CheckpointTarget& target, DecoderModel& model,
                              const fs::path& final_dir,
                              const std::function<absl::Status(const fs::path&)>& more) {
  const fs::path partial = fs::path(final_dir.string() + kPartialSuffix);
  std::error_code ec;
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", partial.string(), ": ", ec.message()));
  }
  KF_RETURN_IF_ERROR(CopySideFiles(target.source_model_dir, partial));
  KF_RETURN_IF_ERROR(
      WriteModelShards(partial, model.NamedParameters(), target.spec.max_shard_bytes()));
  KF_RETURN_IF_ERROR(more(partial));
  fs::remove_all(final_dir, ec);
  fs::rename(partial, final_dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", partial.string(), " to ", final_dir.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

// Complete checkpoints of a job, oldest first (names sort by step).
std::vector<fs::path> CompleteCheckpoints(const fs::path& job_dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(job_dir / kCheckpointsDir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && absl::StartsWith(name, "step-") &&
        !absl::EndsWith(name, kPartialSuffix) && fs::exists(entry.path() / kTrainerStateFile)) {
      found.push_back(entry.path());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

void Prune(const fs::path& job_dir, int keep_last) {
  std::vector<fs::path> all = CompleteCheckpoints(job_dir);
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < all.size(); ++i) {
    std::error_code ec;
    fs::remove_all(all[i], ec);
  }
}

}  // namespace

absl::StatusOr<std::string> WriteTrainingCheckpoint(const CheckpointTarget& target,
                                                    DecoderModel& policy, const AdamW& optimizer,
                                                    const v1::TrainerState& state) {
  const fs::path final_dir =
      target.job_dir / kCheckpointsDir / absl::StrFormat("step-%08d", state.step());
  auto optimizer_and_state = [&](const fs::path& partial) -> absl::Status {
    std::vector<TensorToWrite> opt;
    for (const auto& [name, tensor] : optimizer.StateTensors()) {
      KF_ASSIGN_OR_RETURN(TensorToWrite t, ToWrite(name, tensor));
      opt.push_back(std::move(t));
    }
    KF_RETURN_IF_ERROR(
        WriteSafetensors(partial / kOptimizerFile, opt, {{"format", "kforge-adamw"}}));
    return WriteFileAtomically((partial / kTrainerStateFile).string(), ToJson(state));
  };
  KF_RETURN_IF_ERROR(WriteModelFolder(target, policy, final_dir, optimizer_and_state));
  Prune(target.job_dir, std::max(1, target.spec.keep_last()));
  return final_dir.string();
}

absl::StatusOr<std::string> WriteReferenceModel(const CheckpointTarget& target,
                                                DecoderModel& model) {
  const fs::path final_dir = target.job_dir / kReferenceDir;
  KF_RETURN_IF_ERROR(WriteModelFolder(target, model, final_dir,
                                      [](const fs::path&) { return absl::OkStatus(); }));
  return final_dir.string();
}

std::optional<std::string> ReferenceModel(const fs::path& job_dir) {
  std::error_code ec;
  const fs::path dir = job_dir / kReferenceDir;
  if (!fs::exists(dir / "config.json", ec)) return std::nullopt;
  return dir.string();
}

absl::StatusOr<std::optional<std::string>> LatestCheckpoint(const fs::path& job_dir) {
  std::vector<fs::path> all = CompleteCheckpoints(job_dir);
  if (all.empty()) return std::optional<std::string>();
  return std::optional<std::string>(all.back().string());
}

absl::StatusOr<v1::TrainerState> ReadTrainerState(const fs::path& checkpoint_dir) {
  KF_ASSIGN_OR_RETURN(std::string json,
                      ReadFileToString((checkpoint_dir / kTrainerStateFile).string()));
  v1::TrainerState state;
  if (absl::Status s = ParseJsonMessage(json, &state); !s.ok()) {
    return absl::DataLossError(absl::StrCat((checkpoint_dir / kTrainerStateFile).string(), ": ",
                                            s.message()));
  }
  return state;
}

absl::Status LoadOptimizerState(const fs::path& checkpoint_dir, const v1::TrainerState& state,
                                AdamW& optimizer) {
  KF_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsCheckpoint> file,
                      SafetensorsCheckpoint::OpenFile(checkpoint_dir / kOptimizerFile));
  return TorchCall("restore optimizer state", [&]() -> absl::Status {
    std::unordered_map<std::string, at::Tensor> tensors;
    for (const std::string& name : file->Names()) {
      const TensorView* view = file->Find(name);
      if (view->dtype != TensorDtype::kF32) {
        return absl::DataLossError(absl::StrCat(kOptimizerFile, ": tensor ", name, " is not F32"));
      }
      at::Tensor t = at::empty(view->shape, at::kFloat);
      std::memcpy(t.data_ptr(), view->data.data(), view->data.size());
      tensors.emplace(name, std::move(t));
    }
    return optimizer.LoadState(tensors, state.optimizer_steps());
  });
}

}  // namespace kforge
