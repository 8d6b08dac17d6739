#include "prompts/trajectory_end.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

bool Unusable(const v1::Verdict& verdict) {
  if (verdict.stages_size() == 0) return true;
  return std::any_of(
      verdict.stages().begin(), verdict.stages().end(),
      [](const v1::StageResult& s) { return s.outcome() == v1::OUTCOME_INTERNAL_ERROR; });
}

}  // namespace

bool TrajectoryEnds(const v1::MultiTurnSpec& spec, const v1::Verdict& verdict, int32_t turn) {
  if (turn + 1 >= spec.max_turns()) return true;
  if (Unusable(verdict)) return true;
  // Any flag, the implausible-speedup one included: a correct answer the
  // verifier doubts is worth another look, not a stop.
  if (!verdict.correct() || verdict.hack_flags_size() > 0) return false;
  const double speedup = verdict.speedup_vs_eager();
  return !(speedup > 0) || speedup >= spec.stop_speedup();
}

std::string TurnSampleId(const std::string& job_id, const std::string& group_id, int32_t index,
                         int32_t turn) {
  return turn > 0 ? absl::StrCat(job_id, "/", group_id, "/", index, "/t", turn)
                  : absl::StrCat(job_id, "/", group_id, "/", index);
}

}  // namespace kforge
