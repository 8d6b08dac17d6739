// A job's training curves as one SVG (curves.svg in the job's folder, written
// by the learner at every checkpoint and held-out round), on the chart
// engine of eval/eval_plots.h:
//
//   std::string svg = TrainingCurvesSvg(trainer_state, {.title = "job-000001",
//                                                       .supervised_steps = 60});
//
// No LibTorch, no gRPC: the learner and tests share it.
#ifndef KFORGE_EVAL_TRAINING_CURVES_H_
#define KFORGE_EVAL_TRAINING_CURVES_H_

#include <cstdint>
#include <string>

#include "eval/eval_plots.h"
#include "kforge/v1/learner_state.pb.h"

namespace kforge {

struct TrainingCurvesOptions {
  std::string title;
  // Steps 1..supervised_steps sampled nothing (warm start; every step of an
  // SFT job): they get no reward or pass-rate point and are shaded instead;
  // their supervised loss has a chart of its own.
  int64_t supervised_steps = 0;
  // The mean reward's smoothed line: a trailing moving average over this
  // many sampled steps (fewer at the start), named with its window. Ten
  // steps of a group-sampled reward average out most of its step-to-step
  // noise and still show a trend within the default job's 100 steps.
  int smoothing_window = 10;
};

// A job's curves against the optimiser step, stacked on one x axis so a step
// lines up across them:
//   1. "warm-start loss": the supervised loss of each warm-start step (only
//      when the job has supervised steps);
//   2. the mean reward of each sampled step as points ("mean reward per
//      step") under its moving average ("moving average of N steps");
//   3. the pass rate of each funnel stage per sampled step ("static",
//      "compile", "tiny run", "multi-input", "correct"), and the held-out
//      correct and compile rates of each evaluation round ("held-out
//      correct", "held-out compile") only when a round ran: no legend entry
//      without data;
//   4. multi-turn jobs only (a non-empty turn_history): "trajectories
//      solved by each turn", a line per turn ("solved by turn 1", ...);
//   5. "where each step's time went": seconds per step of the step itself
//      and its stages ("step", "rollout", "verify", "train", "weight sync",
//      "learner wait"; StepTimes), only when the state has step times.
// Histories align with state.step() from their newest end (see TrainerState).
std::string TrainingCurvesSvg(const v1::TrainerState& state, const TrainingCurvesOptions& options);

}  // namespace kforge

#endif  // KFORGE_EVAL_TRAINING_CURVES_H_
