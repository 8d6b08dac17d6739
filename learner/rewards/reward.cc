#include "learner/rewards/reward.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "learner/rewards/completion_format.h"
#include "learner/rewards/sequence_matcher.h"

namespace kforge {
namespace {

bool IsFailure(v1::StageOutcome outcome) {
  return outcome == v1::OUTCOME_FAILED || outcome == v1::OUTCOME_TIMED_OUT ||
         outcome == v1::OUTCOME_CRASHED;
}

bool HasFlag(const v1::Verdict& verdict, v1::HackFlag flag) {
  return std::find(verdict.hack_flags().begin(), verdict.hack_flags().end(), flag) !=
         verdict.hack_flags().end();
}

// Why the verdict cannot be used for training; empty when it can.
std::string UnusableReason(const v1::Verdict& verdict) {
  if (verdict.stages().empty()) return "no stages";
  for (const v1::StageResult& stage : verdict.stages()) {
    if (stage.outcome() == v1::OUTCOME_INTERNAL_ERROR) {
      return absl::StrCat("internal error at ", v1::Stage_Name(stage.stage()), ": ",
                          stage.message());
    }
  }
  return "";
}

// Names of the flags that bring the hack penalty (all but implausible speedup).
std::vector<std::string> PenalisedFlags(const v1::Verdict& verdict) {
  std::vector<std::string> names;
  for (int flag : verdict.hack_flags()) {
    if (flag == v1::HACK_SPEEDUP_IMPLAUSIBLE) continue;
    names.push_back(v1::HackFlag_IsValid(flag) ? v1::HackFlag_Name(flag) : absl::StrCat(flag));
  }
  return names;
}

struct StageCredit {
  double reward = 0;
  std::string label;  // "correct", "failed compile"
};

// std::nullopt when the verdict is not correct yet names no failed
// correctness stage (an inconsistent verdict).
std::optional<StageCredit> CreditForStage(const v1::RewardSpec& spec, const v1::Verdict& verdict) {
  if (verdict.correct()) return StageCredit{spec.correct(), "correct"};
  for (const v1::StageResult& stage : verdict.stages()) {
    if (!IsFailure(stage.outcome())) continue;
    switch (stage.stage()) {
      case v1::STAGE_STATIC:
        return StageCredit{spec.fail_static(), "failed static"};
      case v1::STAGE_COMPILE:
        return StageCredit{spec.fail_compile(), "failed compile"};
      case v1::STAGE_TINY_RUN:
        return StageCredit{spec.fail_tiny_run(), "failed tiny run"};
      case v1::STAGE_MULTI_INPUT:
        return StageCredit{spec.fail_multi_input(), "failed multi-input"};
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

bool TimingPassed(const v1::Verdict& verdict) {
  for (const v1::StageResult& stage : verdict.stages()) {
    if (stage.stage() == v1::STAGE_TIMING) return stage.outcome() == v1::OUTCOME_PASSED;
  }
  return false;
}

double SpeedupTerm(const v1::RewardSpec& spec, const v1::Verdict& verdict) {
  if (!verdict.correct() || !TimingPassed(verdict) || !(verdict.speedup_vs_eager() > 0) ||
      HasFlag(verdict, v1::HACK_SPEEDUP_IMPLAUSIBLE)) {
    return 0;
  }
  // Not std::clamp: a spec with min > max must not be undefined behaviour.
  const double log_speedup =
      std::min(std::max(std::log(verdict.speedup_vs_eager()), spec.speedup_log_min()),
               spec.speedup_log_max());
  return spec.speedup_weight() * log_speedup;
}

double SimilarityTerm(const v1::RewardSpec& spec, const v1::Verdict& verdict,
                      std::string_view completion, std::string_view reference_solution) {
  if (spec.similarity_weight() == 0 || reference_solution.empty()) return 0;
  const std::string_view code =
      verdict.extracted_code().empty() ? completion : std::string_view(verdict.extracted_code());
  return spec.similarity_weight() * SequenceMatcherRatio(code, reference_solution);
}

std::string Explain(const RewardBreakdown& r, const StageCredit& credit,
                    const v1::Verdict& verdict) {
  std::string text = absl::StrFormat("%s: %g", credit.label, r.stage);
  if (r.speedup != 0) {
    absl::StrAppendFormat(&text, " + speedup %g (%.3gx)", r.speedup, verdict.speedup_vs_eager());
  } else if (verdict.correct() && HasFlag(verdict, v1::HACK_SPEEDUP_IMPLAUSIBLE)) {
    absl::StrAppend(&text, " (speedup withheld: HACK_SPEEDUP_IMPLAUSIBLE)");
  }
  if (r.format != 0) absl::StrAppendFormat(&text, " + format %g", r.format);
  if (r.similarity != 0) absl::StrAppendFormat(&text, " + similarity %g", r.similarity);
  return text;
}

}  // namespace

RewardBreakdown ComputeReward(const v1::RewardSpec& spec, const v1::Verdict& verdict,
                              std::string_view completion, std::string_view reference_solution,
                              bool reasoning_tags) {
  RewardBreakdown r;
  if (std::string reason = UnusableReason(verdict); !reason.empty()) {
    r.usable = false;
    r.explanation = absl::StrCat("unusable: ", reason);
    return r;
  }
  if (std::vector<std::string> flags = PenalisedFlags(verdict); !flags.empty()) {
    r.hacked = true;
    r.total = r.reasoning = r.code = spec.hack_penalty();
    r.explanation =
        absl::StrFormat("hacked (%s): penalty %g", absl::StrJoin(flags, ", "), spec.hack_penalty());
    return r;
  }
  const std::optional<StageCredit> credit = CreditForStage(spec, verdict);
  if (!credit.has_value()) {
    r.usable = false;
    r.explanation = "unusable: not correct, yet no correctness stage failed";
    return r;
  }
  r.stage = credit->reward;
  r.speedup = SpeedupTerm(spec, verdict);
  r.format = spec.format_weight() * AnalyzeCompletionFormat(completion, reasoning_tags).score;
  r.similarity = SimilarityTerm(spec, verdict, completion, reference_solution);
  r.total = r.stage + r.speedup + r.format + r.similarity;
  r.code = r.stage + r.format + r.similarity;
  r.reasoning = r.total;
  r.explanation = Explain(r, *credit, verdict);
  return r;
}

}  // namespace kforge
