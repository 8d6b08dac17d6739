#include "learner/training/sample_log.h"

#include <fstream>
#include <utility>
#include <vector>

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

// A line's fields in the order they are written: people read the file, and
// a Struct would print its keys in hash order.
using Fields = std::vector<std::pair<std::string, google::protobuf::Value>>;

void Put(Fields& line, const std::string& key, const std::string& value) {
  line.emplace_back(key, google::protobuf::Value()).second.set_string_value(value);
}
void Put(Fields& line, const std::string& key, double value) {
  line.emplace_back(key, google::protobuf::Value()).second.set_number_value(value);
}
void Put(Fields& line, const std::string& key, bool value) {
  line.emplace_back(key, google::protobuf::Value()).second.set_bool_value(value);
}

// {"key":value,...}; the keys are plain identifiers of this file's own.
std::string ToJson(const Fields& line) {
  std::string json = "{";
  for (const auto& [key, value] : line) {
    std::string text;
    if (!google::protobuf::util::MessageToJsonString(value, &text).ok()) text = "null";
    absl::StrAppend(&json, json.size() > 1 ? "," : "", "\"", key, "\":", text);
  }
  return json + "}";
}

}  // namespace

std::string SampleLogLine(int64_t step, const ScoredGroup& group, size_t index, int32_t max_chars) {
  const v1::ScoredSample& scored = group.samples[index];
  const v1::Sample& sample = scored.sample();
  const v1::Verdict& verdict = scored.verdict();
  Fields line;
  Put(line, "step", static_cast<double>(step));
  Put(line, "task", group.item.task().id());
  Put(line, "group", group.item.group_id());
  Put(line, "index", static_cast<double>(sample.key().index_in_group()));
  Put(line, "policy_version", static_cast<double>(sample.policy_version()));
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
  google::protobuf::Value flags;
  for (int flag : verdict.hack_flags()) {
    flags.mutable_list_value()->add_values()->set_string_value(
        v1::HackFlag_Name(static_cast<v1::HackFlag>(flag)));
  }
  if (verdict.hack_flags_size() == 0) flags.mutable_list_value();
  line.emplace_back("hack_flags", std::move(flags));
  Put(line, "cached", verdict.cached());
  Put(line, "rollout_worker", sample.rollout_worker_id());
  Put(line, "finish_reason", sample.finish_reason());
  Put(line, "completion_tokens", static_cast<double>(sample.completion_tokens_size()));
  Put(line, "completion", Head(sample.completion_text(), max_chars));
  return ToJson(line);
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
