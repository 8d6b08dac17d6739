#include "learner/training/sample_log.h"

#include <fstream>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

std::string Head(const std::string& text, int32_t max_chars) {
  if (text.size() <= static_cast<size_t>(max_chars)) return text;
  // Back off to a UTF-8 character boundary, so the JSON stays valid text.
  size_t cut = static_cast<size_t>(max_chars);
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "\n[... ", text.size() - cut, " more bytes]");
}

void Put(google::protobuf::Struct& line, const std::string& key, const std::string& value) {
  (*line.mutable_fields())[key].set_string_value(value);
}
void Put(google::protobuf::Struct& line, const std::string& key, double value) {
  (*line.mutable_fields())[key].set_number_value(value);
}
void Put(google::protobuf::Struct& line, const std::string& key, bool value) {
  (*line.mutable_fields())[key].set_bool_value(value);
}

}  // namespace

std::string SampleLogLine(int64_t step, const ScoredGroup& group, size_t index, int32_t max_chars) {
  const v1::ScoredSample& scored = group.samples[index];
  const v1::Sample& sample = scored.sample();
  const v1::Verdict& verdict = scored.verdict();
  google::protobuf::Struct line;
  Put(line, "step", static_cast<double>(step));
  Put(line, "task", group.item.task().id());
  Put(line, "group", group.item.group_id());
  Put(line, "index", static_cast<double>(sample.key().index_in_group()));
  Put(line, "policy_version", static_cast<double>(sample.policy_version()));
  Put(line, "rollout_worker", sample.rollout_worker_id());
  Put(line, "finish_reason", sample.finish_reason());
  Put(line, "completion_tokens", static_cast<double>(sample.completion_tokens_size()));
  if (index < group.rewards.size()) {
    const RewardBreakdown& reward = group.rewards[index];
    Put(line, "reward", reward.total);
    Put(line, "reward_explained", reward.explanation);
    Put(line, "usable", reward.usable);
    Put(line, "hacked", reward.hacked);
  }
  Put(line, "correct", verdict.correct());
  Put(line, "stage_reached", v1::Stage_Name(verdict.stage_reached()));
  if (verdict.stages_size() > 0) {
    const v1::StageResult& last = verdict.stages(verdict.stages_size() - 1);
    Put(line, "outcome", v1::StageOutcome_Name(last.outcome()));
    Put(line, "message", Head(last.message(), max_chars));
  }
  if (verdict.speedup_vs_eager() > 0) Put(line, "speedup_vs_eager", verdict.speedup_vs_eager());
  google::protobuf::ListValue* flags = (*line.mutable_fields())["hack_flags"].mutable_list_value();
  for (int flag : verdict.hack_flags()) {
    flags->add_values()->set_string_value(v1::HackFlag_Name(static_cast<v1::HackFlag>(flag)));
  }
  Put(line, "cached", verdict.cached());
  Put(line, "completion", Head(sample.completion_text(), max_chars));
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(line, &json, options).ok()) return "{}";
  return json;
}

absl::Status AppendSampleLog(const std::filesystem::path& file, int64_t step,
                             const std::vector<ScoredGroup>& groups, const v1::SampleLogSpec& spec) {
  if (spec.per_step() <= 0) return absl::OkStatus();
  // The job's folder appears with its first checkpoint; the log may come first.
  std::error_code ignored;
  std::filesystem::create_directories(file.parent_path(), ignored);
  std::ofstream out(file, std::ios::app);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot open ", file.string(), " to append"));
  int32_t written = 0;
  for (const ScoredGroup& group : groups) {
    for (size_t i = 0; i < group.samples.size() && written < spec.per_step(); ++i, ++written) {
      out << SampleLogLine(step, group, i, spec.max_chars()) << '\n';
    }
  }
  out.flush();
  if (!out) return absl::DataLossError(absl::StrCat("writing ", file.string(), " failed"));
  return absl::OkStatus();
}

}  // namespace kforge
