// A multi-turn trajectory's turns (issue 24), as the rollout worker and the
// learner must both see them: the sample id each turn carries (the worker
// stamps it, the learner checks it), and the one rule both apply to a
// turn's verdict to decide when the trajectory ends (the worker: whether to
// sample another turn; the learner: whether a group's trajectory is
// complete). Where their verdicts of a turn differ (a re-verification), the
// learner's counts: its ack says whether it wants the next turn
// (SampleAck.next_turn) and the worker follows it, so the two never
// disagree about where a trajectory stops.
//
//   if (TrajectoryEnds(item.multi_turn(), verdict, turn)) CloseTrajectory();
//   else SubmitNextTurn(RenderTurnFeedback(verdict, spec.feedback_max_chars()));
//
// A trajectory ends after turn `turn` (0-based) when
//   * it was the last turn the spec allows (turn + 1 >= max_turns; a spec
//     with max_turns unset or below 1 is single-turn, so every trajectory
//     ends at turn 0, as before multi-turn existed);
//   * the verdict is unusable (no stages, or a stage with an internal
//     error): the verifier, not the policy, failed, and feedback about it
//     would teach nothing;
//   * the turn is correct, raised no hack flag, and is fast enough: not
//     timed (nothing a revision could be told to improve), or a speedup over
//     eager of at least stop_speedup.
#ifndef KFORGE_PROMPTS_TRAJECTORY_END_H_
#define KFORGE_PROMPTS_TRAJECTORY_END_H_

#include <cstdint>
#include <string>

#include "kforge/v1/job.pb.h"
#include "kforge/v1/verdict.pb.h"

namespace kforge {

bool TrajectoryEnds(const v1::MultiTurnSpec& spec, const v1::Verdict& verdict, int32_t turn);

// The sample id of turn `turn` of trajectory `index`: "<job>/<group>/<index>",
// with "/t<turn>" from turn 1 on (so single-turn ids are as they always were).
std::string TurnSampleId(const std::string& job_id, const std::string& group_id, int32_t index,
                         int32_t turn);

// Whether `spec` asks for more than one turn.
inline bool IsMultiTurn(const v1::MultiTurnSpec& spec) { return spec.max_turns() > 1; }

}  // namespace kforge

#endif  // KFORGE_PROMPTS_TRAJECTORY_END_H_
