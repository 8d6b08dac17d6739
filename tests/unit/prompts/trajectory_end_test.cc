// The end rule of a multi-turn trajectory: the last allowed turn, an
// unusable verdict, or a correct, unflagged and fast enough turn ends it;
// anything else asks for another turn.
#include "prompts/trajectory_end.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

v1::MultiTurnSpec Spec(int32_t max_turns, double stop_speedup = 1.0) {
  v1::MultiTurnSpec spec;
  spec.set_max_turns(max_turns);
  spec.set_stop_speedup(stop_speedup);
  return spec;
}

v1::Verdict Verdict(v1::Stage last, v1::StageOutcome outcome, bool correct, double speedup = 0) {
  v1::Verdict verdict;
  for (int s = v1::STAGE_STATIC; s <= last; ++s) {
    v1::StageResult* stage = verdict.add_stages();
    stage->set_stage(static_cast<v1::Stage>(s));
    stage->set_outcome(s == last ? outcome : v1::OUTCOME_PASSED);
  }
  verdict.set_correct(correct);
  verdict.set_speedup_vs_eager(speedup);
  return verdict;
}

TEST(TrajectoryEndTest, SingleTurnSpecsEndEveryTrajectoryAtItsFirstTurn) {
  const v1::Verdict failed = Verdict(v1::STAGE_COMPILE, v1::OUTCOME_FAILED, false);
  EXPECT_TRUE(TrajectoryEnds(Spec(1), failed, 0));
  EXPECT_TRUE(TrajectoryEnds(v1::MultiTurnSpec(), failed, 0));  // unset: single-turn
  EXPECT_TRUE(TrajectoryEnds(v1::MultiTurnSpec(), v1::Verdict(), 0));
}

TEST(TrajectoryEndTest, AFailedTurnContinuesUntilTheLastTurn) {
  const v1::Verdict failed = Verdict(v1::STAGE_MULTI_INPUT, v1::OUTCOME_FAILED, false);
  EXPECT_FALSE(TrajectoryEnds(Spec(3), failed, 0));
  EXPECT_FALSE(TrajectoryEnds(Spec(3), failed, 1));
  EXPECT_TRUE(TrajectoryEnds(Spec(3), failed, 2));
}

TEST(TrajectoryEndTest, AnUnusableVerdictEndsTheTrajectory) {
  EXPECT_TRUE(TrajectoryEnds(Spec(4), v1::Verdict(), 0));  // no stages
  EXPECT_TRUE(TrajectoryEnds(
      Spec(4), Verdict(v1::STAGE_TINY_RUN, v1::OUTCOME_INTERNAL_ERROR, false), 1));
}

TEST(TrajectoryEndTest, ACorrectTurnEndsOnceFastEnoughOrUntimed) {
  const v1::MultiTurnSpec spec = Spec(4, 1.2);
  EXPECT_TRUE(TrajectoryEnds(spec, Verdict(v1::STAGE_MULTI_INPUT, v1::OUTCOME_PASSED, true), 0));
  EXPECT_TRUE(TrajectoryEnds(spec, Verdict(v1::STAGE_TIMING, v1::OUTCOME_PASSED, true, 1.2), 0));
  EXPECT_TRUE(TrajectoryEnds(spec, Verdict(v1::STAGE_TIMING, v1::OUTCOME_PASSED, true, 3.0), 0));
  EXPECT_FALSE(TrajectoryEnds(spec, Verdict(v1::STAGE_TIMING, v1::OUTCOME_PASSED, true, 0.9), 0));
}

TEST(TrajectoryEndTest, ACorrectButFlaggedTurnContinues) {
  v1::Verdict flagged = Verdict(v1::STAGE_TIMING, v1::OUTCOME_PASSED, true, 5.0);
  flagged.add_hack_flags(v1::HACK_TORCH_FALLBACK);
  EXPECT_FALSE(TrajectoryEnds(Spec(2), flagged, 0));
  EXPECT_TRUE(TrajectoryEnds(Spec(2), flagged, 1));
}

}  // namespace
}  // namespace kforge
