#include "model/sampling/stop_matcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/config/proto_defaults.h"
#include "common/status_macros.h"

namespace kforge {

absl::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kStopString:
      return "stop_string";
    case FinishReason::kMaxTokens:
      return "max_tokens";
  }
  return "";
}

absl::StatusOr<StopConditions> StopConditionsFromProto(
    const v1::SamplingParams& proto, absl::flat_hash_set<int32_t> eos_token_ids) {
  // An unset max_new_tokens reads as 0 (no limit) without the defaults.
  v1::SamplingParams effective = proto;
  KF_RETURN_IF_ERROR(ApplyProtoDefaults(&effective));
  StopConditions conditions;
  conditions.stop_strings.assign(effective.stop().begin(), effective.stop().end());
  conditions.eos_token_ids = std::move(eos_token_ids);
  conditions.max_new_tokens = effective.max_new_tokens();
  return conditions;
}

absl::StatusOr<StopMatcher> StopMatcher::Create(StopConditions conditions) {
  for (size_t i = 0; i < conditions.stop_strings.size(); ++i) {
    if (conditions.stop_strings[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop[", i, "]: an empty stop string would match before any token"));
    }
  }
  if (conditions.max_new_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_new_tokens: ", conditions.max_new_tokens, " is negative (0 means no limit)"));
  }
  return StopMatcher(std::move(conditions));
}

StopMatcher::StopMatcher(StopConditions conditions) : conditions_(std::move(conditions)) {
  for (const std::string& stop : conditions_.stop_strings) {
    longest_stop_ = std::max(longest_stop_, stop.size());
  }
}

const std::string& StopMatcher::matched_stop_string() const {
  static const std::string* const kNone = new std::string();
  return matched_ < 0 ? *kNone : conditions_.stop_strings[matched_];
}

FinishReason StopMatcher::Append(int32_t token_id, absl::string_view token_text) {
  if (finished()) return reason_;
  ++tokens_;
  if (conditions_.eos_token_ids.contains(token_id)) {
    reason_ = FinishReason::kEos;
    return reason_;
  }
  const size_t old_size = text_.size();
  text_.append(token_text.data(), token_text.size());
  if (FindStopString(old_size)) {
    reason_ = FinishReason::kStopString;
  } else if (conditions_.max_new_tokens > 0 && tokens_ >= conditions_.max_new_tokens) {
    reason_ = FinishReason::kMaxTokens;
  }
  return reason_;
}

bool StopMatcher::FindStopString(size_t old_size) {
  if (longest_stop_ == 0 || text_.size() == old_size) return false;
  // text_[0, old_size) held no stop string, so a new occurrence ends in the
  // appended bytes and starts at most longest_stop_ - 1 bytes before them.
  const size_t from = old_size >= longest_stop_ - 1 ? old_size - (longest_stop_ - 1) : 0;
  size_t earliest = std::string::npos;
  for (size_t i = 0; i < conditions_.stop_strings.size(); ++i) {
    const size_t at = text_.find(conditions_.stop_strings[i], from);
    // Earliest start wins; among stop strings starting at the same byte the
    // first listed is reported (the kept text is the same).
    if (at < earliest) {
      earliest = at;
      matched_ = static_cast<int>(i);
    }
  }
  if (earliest == std::string::npos) return false;
  text_.resize(earliest);
  return true;
}

}  // namespace kforge
