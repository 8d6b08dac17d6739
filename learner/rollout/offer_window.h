// How many training groups a job driver offers, so that the groups out
// (offered and not yet trained on) cover the step whose batch it collects
// and, within the staleness bound, the steps after it (JobSpec.max_staleness,
// lookahead_steps). Evaluation groups are not counted. Pure arithmetic.
//
//   const OfferWindow window{.prompts_per_step = 8, .max_staleness = 1,
//                            .lookahead_steps = 1, .steps_after = 10};
//   // Collecting: 8 x (1 + 1) groups out in all, the batch so far included.
//   GroupsToOfferWhileCollecting(window, {.untaken = 5, .batch = 3});  // 8
//   // The batch complete: the next step's 8 stay out while this one trains.
//   GroupsToOfferAfterBatch(window, {.untaken = 6, .carried = 2});     // 0
//
// THE WINDOW. A group offered under policy version v while step n is
// collected is trained, when groups come back in order, by step n + ahead
// at the latest, under version v + ahead at most; so ahead never exceeds
// max_staleness, nor the steps left. With lookahead_steps 0 a job with
// max_staleness >= 1 offers the next step's groups once this step's batch
// is complete (they are sampled while it trains), and nothing ahead while
// it collects.
//
// THE CAP. Whatever the window, the groups out (older ones included) never
// exceed what the rest of the job can train: prompts_per_step for this step
// and each after it. So no group is left over when the job ends, even when
// spares, lookahead and groups that turned out newer than counted meet.
//
// SPARES. With spare_groups, each step's groups are offered that many over
// its batch, so the batch is the first prompts_per_step to come back and a
// slow group (a verification waiting for a new reference epoch) or a lost
// one does not hold the step for a group round offered only then. The
// spares left over are carried to the next step: trained there when still
// within max_staleness, else dropped and counted as stale (with
// max_staleness 1 nearly all are: they were sampled a version before the
// next step's own groups). At most prompts_per_step spares; near the job's
// end THE CAP trims them.
#ifndef KFORGE_LEARNER_ROLLOUT_OFFER_WINDOW_H_
#define KFORGE_LEARNER_ROLLOUT_OFFER_WINDOW_H_

#include <cstdint>

namespace kforge {

struct OfferWindow {
  int64_t prompts_per_step = 0;  // groups each step trains on
  int32_t max_staleness = 0;
  int32_t lookahead_steps = 0;
  // Offered beyond prompts_per_step for each step but the last (JobSpec
  // spare_groups_per_step, at most prompts_per_step): the batch is the
  // first prompts_per_step back.
  int64_t spare_groups = 0;
  // Steps of the job after the one whose batch is collected.
  int64_t steps_after = 0;
};

// The job's training groups not yet trained on, where they are.
struct GroupsOut {
  // In the GroupTracker: pending, in flight, or complete and not yet taken
  // (GroupTracker::UntakenGroups).
  int64_t untaken = 0;
  // Taken: in this step's batch, and complete beyond it (carried to a
  // later step).
  int64_t batch = 0;
  int64_t carried = 0;
  // Out as well but not counted above: offered or sampled under a version
  // too old to train in the steps offered for. They may still train (a
  // worker can sample under newer weights than its group asked for), so
  // they count against the most the rest of the job can train.
  int64_t older = 0;
};

// Later steps whose groups may be out while this step's batch is
// collected: min(lookahead_steps, max_staleness, steps_after), at least 0.
int64_t StepsAhead(const OfferWindow& window);

// While this step's batch is short: what brings the groups out to
// prompts_per_step + spares for this step and each of the StepsAhead after
// it (no spares for the job's last step), or 0.
int64_t GroupsToOfferWhileCollecting(const OfferWindow& window, const GroupsOut& out);

// Once this step's batch is complete (out.batch is not counted: it trains
// now): with max_staleness >= 1 and a step after this one, what brings the
// groups out to prompts_per_step + spares for each of the next
// max(1, StepsAhead) steps (no spares for the job's last step); otherwise 0.
int64_t GroupsToOfferAfterBatch(const OfferWindow& window, const GroupsOut& out);

}  // namespace kforge

#endif  // KFORGE_LEARNER_ROLLOUT_OFFER_WINDOW_H_
