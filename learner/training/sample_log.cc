#include "learner/training/sample_log.h"

#include <cmath>
#include <fstream>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "model/tokenizer/unicode.h"

namespace kforge {
namespace {

std::string Head(const std::string& text, int32_t max_chars) {
  if (text.size() <= static_cast<size_t>(max_chars)) return text;
  // Back off to a UTF-8 character boundary, so the JSON stays valid text.
  size_t cut = static_cast<size_t>(max_chars);
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "\n[... ", text.size() - cut, " more bytes]");
}

// The last max_chars bytes of `text`, from a UTF-8 character's start, the
// cut marked: a follow-up prompt's feedback sits at its end.
std::string Tail(const std::string& text, int32_t max_chars) {
  if (text.size() <= static_cast<size_t>(max_chars)) return text;
  size_t cut = text.size() - static_cast<size_t>(max_chars);
  while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;
  return absl::StrCat("[", cut, " bytes before ...]\n", text.substr(cut));
}

// A line's fields in the order they are written (people read the file),
// each value already JSON text.
using Fields = std::vector<std::pair<std::string, std::string>>;

// `text` as a JSON string, made valid UTF-8 first as the tokenizer decodes
// (tokenizer::Utf8Lossy: each ill-formed sequence one U+FFFD), so every line
// stays valid JSON whatever bytes a message or completion holds.
std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (const char ch : tokenizer::Utf8Lossy(absl::string_view(text.data(), text.size()))) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<int>(ch));
        } else {
          out.push_back(ch);
        }
    }
  }
  out += "\"";
  return out;
}

void Put(Fields& line, const std::string& key, const std::string& value) {
  line.emplace_back(key, JsonString(value));
}
void Put(Fields& line, const std::string& key, double value) {
  line.emplace_back(key, std::isfinite(value) ? absl::StrFormat("%.10g", value) : "null");
}
void Put(Fields& line, const std::string& key, bool value) {
  line.emplace_back(key, value ? "true" : "false");
}
// Epoch microseconds as an exact integer (a double's %.10g would round
// them to the second).
void PutMicros(Fields& line, const std::string& key, int64_t micros) {
  line.emplace_back(key, absl::StrCat(micros));
}

// {"key":value,...}; the keys are plain identifiers of this file's own.
std::string ToJson(const Fields& line) {
  std::string json = "{";
  for (const auto& [key, value] : line) {
    absl::StrAppend(&json, json.size() > 1 ? "," : "", "\"", key, "\":", value);
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
  // Multi-turn jobs only, so single-turn lines read as before.
  if (group.item.multi_turn().max_turns() > 1) {
    Put(line, "turn", static_cast<double>(sample.key().turn()));
  }
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
  std::vector<std::string> flags;
  for (int flag : verdict.hack_flags()) {
    flags.push_back(JsonString(v1::HackFlag_Name(static_cast<v1::HackFlag>(flag))));
  }
  line.emplace_back("hack_flags", absl::StrCat("[", absl::StrJoin(flags, ","), "]"));
  Put(line, "cached", verdict.cached());
  // Where the verifier's time went, for a step that waited on it: each
  // stage's seconds, the wait for the GPU within them, the wait for a
  // correctness slot before them, and whether the
  // task's reference outputs and baseline timings were already at hand.
  Put(line, "verify_seconds", verdict.total_seconds());
  Put(line, "device_wait_seconds", verdict.device_wait_seconds());
  Put(line, "queue_seconds", verdict.queue_seconds());
  Fields stages;
  for (const v1::StageResult& stage : verdict.stages()) {
    Put(stages, v1::Stage_Name(stage.stage()), stage.seconds());
  }
  line.emplace_back("stage_seconds", ToJson(stages));
  Put(line, "reference_reused", verdict.reference_reused());
  Put(line, "baselines_cached", verdict.baselines_cached());
  Put(line, "rollout_worker", sample.rollout_worker_id());
  Put(line, "verifier", scored.verifier_id());
  // When each worker was busy with it (epoch microseconds, 0 where a worker
  // did not stamp it), so a job's samples tell how long each waited.
  PutMicros(line, "generation_started_us", sample.started_at_us());
  PutMicros(line, "generation_finished_us", sample.finished_at_us());
  PutMicros(line, "verify_started_us", verdict.started_at_us());
  PutMicros(line, "verify_finished_us", verdict.finished_at_us());
  Put(line, "finish_reason", sample.finish_reason());
  Put(line, "completion_tokens", static_cast<double>(sample.completion_tokens_size()));
  Put(line, "completion", Head(sample.completion_text(), max_chars));
  // A follow-up turn's prompt ends with the feedback it was shown.
  if (sample.key().turn() > 0) Put(line, "prompt", Tail(sample.prompt_text(), max_chars));
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
