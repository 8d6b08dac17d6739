// ComputeReward: the scalar reward of one verified sample, from its verdict
// and the job's RewardSpec (proto/kforge/v1/job.proto). Pure: no state, no
// I/O, deterministic.
//
// `spec` must have its defaults applied (ApplyProtoDefaults, as the job's
// spec check does); unset fields are read as proto3 zeros otherwise.
//
// RULES.
//   - Unusable: a verdict with no stages, with a stage whose outcome is
//     OUTCOME_INTERNAL_ERROR (the verifier's fault, not the candidate's), or
//     that is not correct yet names no failed correctness stage, is neither
//     rewarded nor penalised: usable = false, every term 0, and the sample
//     is left out of training.
//   - Hacked: any hack flag other than HACK_SPEEDUP_IMPLAUSIBLE makes every
//     term 0 and total = reasoning = code = hack_penalty.
//   - stage: verdict.correct() gives `correct` (a failure at the timing
//     stage still counts as correct). Otherwise the first stage that FAILED,
//     TIMED_OUT or CRASHED gives fail_static, fail_compile, fail_tiny_run or
//     fail_multi_input.
//   - speedup: speedup_weight * clamp(log(speedup_vs_eager), speedup_log_min,
//     speedup_log_max), only when correct, the timing stage PASSED,
//     speedup_vs_eager > 0 and HACK_SPEEDUP_IMPLAUSIBLE is not raised. That
//     flag withholds the speedup term but not the rest: the candidate passed
//     every correctness stage on fresh inputs, only its timing is not
//     believed, so faking the timing earns nothing and an honest but
//     surprising kernel is not punished as a cheat.
//   - format: format_weight * AnalyzeCompletionFormat(completion,
//     reasoning_tags).score.
//   - similarity: similarity_weight * SequenceMatcherRatio(code, reference)
//     where code is verdict.extracted_code() (the completion when empty); 0,
//     and not computed (it is O(n*m)), when the weight is 0 or there is no
//     reference solution.
//   - total = stage + speedup + format + similarity.
//
// HIERARCHICAL (RewardSpec.hierarchical; both are filled either way):
//   code      = stage + format + similarity: the code tokens are judged by
//               whether the code is correct and well-formed;
//   reasoning = total: the plan is judged by the whole outcome, speedup
//               included.
// The learner assigns `reasoning` to the tokens of
// [reasoning_begin, reasoning_end) and `code` to [code_begin, code_end) of
// AnalyzeCompletionFormat.
//
//   RewardBreakdown r = ComputeReward(job.reward(), scored.verdict(), completion,
//                                     task.reference_solution(), job.prompt().reasoning_tags());
//   if (!r.usable) continue;  // verifier fault: leave the sample out
//   rewards.push_back(r.total);
#ifndef KFORGE_LEARNER_REWARDS_REWARD_H_
#define KFORGE_LEARNER_REWARDS_REWARD_H_

#include <string>
#include <string_view>

#include "kforge/v1/job.pb.h"
#include "kforge/v1/verdict.pb.h"

namespace kforge {

struct RewardBreakdown {
  bool usable = true;       // false: a verifier fault or an empty verdict; not for training
  double total = 0;         // what training uses when not hierarchical
  double stage = 0;         // partial credit by the stage reached
  double speedup = 0;       // speedup term
  double format = 0;        // format_weight * format score
  double similarity = 0;    // similarity_weight * ratio to the reference solution
  bool hacked = false;      // a penalised hack flag was raised
  double reasoning = 0;     // hierarchical: reward of the reasoning tokens
  double code = 0;          // hierarchical: reward of the code tokens
  std::string explanation;  // "failed compile: 0.3 + format 0.1"
};

RewardBreakdown ComputeReward(const v1::RewardSpec& spec, const v1::Verdict& verdict,
                              std::string_view completion, std::string_view reference_solution,
                              bool reasoning_tags);

}  // namespace kforge

#endif  // KFORGE_LEARNER_REWARDS_REWARD_H_
