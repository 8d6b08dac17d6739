// StopMatcher: decides, token by token, when one sequence's generation is
// finished and what its completion text is.
//
//   KF_ASSIGN_OR_RETURN(StopMatcher stop, StopMatcher::Create(conditions));
//   for (...each sampled token...) {
//     if (stop.Append(token_id, tokenizer.TokenBytes(token_id)) != FinishReason::kNone) break;
//   }
//   sample.set_completion_text(stop.text());
//   sample.set_finish_reason(std::string(FinishReasonName(stop.finish_reason())));
//
// Contract, per token fed, in this order:
//   1. An EOS id (conditions.eos_token_ids) finishes with kEos; its text is
//      not added to text().
//   2. Otherwise the token's text is appended, and if any stop string now
//      occurs in text() generation finishes with kStopString and text() is
//      cut just before the earliest occurrence: the stop string and anything
//      after it (the rest of that token) are dropped, as vLLM does by
//      default (include_stop_str_in_output = false). A stop string may span
//      any number of tokens.
//   3. Otherwise, once max_new_tokens tokens have been fed (EOS included),
//      generation finishes with kMaxTokens.
// Only the text is cut: the caller keeps every sampled token id, EOS and the
// token that completed a stop string included, since the policy did sample
// them and the learner trains on their log-probabilities.
//
// Feed each token's raw bytes (byte-level BPE pieces), not a per-token UTF-8
// decode: a character split across tokens is then whole in text(), and a
// stop string matches across the split.
//
// One matcher per sequence, used from one thread.
#ifndef KFORGE_MODEL_SAMPLING_STOP_MATCHER_H_
#define KFORGE_MODEL_SAMPLING_STOP_MATCHER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kforge/v1/job.pb.h"

namespace kforge {

enum class FinishReason { kNone, kEos, kStopString, kMaxTokens };

// The strings of kforge.v1.Sample.finish_reason: "eos", "stop_string",
// "max_tokens"; "" for kNone.
absl::string_view FinishReasonName(FinishReason reason);

struct StopConditions {
  std::vector<std::string> stop_strings;  // none may be empty
  absl::flat_hash_set<int32_t> eos_token_ids;
  int32_t max_new_tokens = 0;  // 0: no limit
};

// stop and max_new_tokens of the job's proto, unset fields taking their
// annotated defaults; the EOS ids come from the model's tokenizer.
absl::StatusOr<StopConditions> StopConditionsFromProto(
    const v1::SamplingParams& proto, absl::flat_hash_set<int32_t> eos_token_ids);

class StopMatcher {
 public:
  // INVALID_ARGUMENT for an empty stop string (it would match before the
  // first token) or a negative max_new_tokens.
  static absl::StatusOr<StopMatcher> Create(StopConditions conditions);

  // Feeds the next sampled token; returns kNone while generation goes on,
  // else the reason it finished. After it finished, further calls change
  // nothing and return the same reason.
  FinishReason Append(int32_t token_id, absl::string_view token_text);

  bool finished() const { return reason_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return reason_; }
  // The completion text so far; once finished, the text to keep.
  const std::string& text() const { return text_; }
  // The stop string that finished generation; empty unless kStopString.
  const std::string& matched_stop_string() const;
  // Tokens fed before generation finished, the finishing one included.
  int32_t tokens() const { return tokens_; }

 private:
  explicit StopMatcher(StopConditions conditions);
  // Looks for a stop string ending after text_[old_size]; cuts text_ there.
  bool FindStopString(size_t old_size);

  StopConditions conditions_;
  size_t longest_stop_ = 0;
  std::string text_;
  int32_t tokens_ = 0;
  FinishReason reason_ = FinishReason::kNone;
  int matched_ = -1;  // index into conditions_.stop_strings
};

}  // namespace kforge

#endif  // KFORGE_MODEL_SAMPLING_STOP_MATCHER_H_
