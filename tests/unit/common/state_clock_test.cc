// StateClock and SlotClock: time attributed to states and slots, driven by
// made-up instants (no clock is read).
#include "common/metrics/state_clock.h"

#include <gtest/gtest.h>

#include "common/metrics/slot_clock.h"

namespace kforge {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);
absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

TEST(StateClockTest, AttributesTimeToTheStateItWasSpentIn) {
  StateClock clock(3, /*initial=*/2, kT0);
  clock.Enter(0, At(5));   // 5 s in state 2
  clock.Enter(1, At(7));   // 2 s in state 0
  clock.Enter(0, At(8));   // 1 s in state 1
  const std::vector<absl::Duration> totals = clock.Totals(At(11));  // 3 s more in state 0
  EXPECT_EQ(totals[0], absl::Seconds(5));
  EXPECT_EQ(totals[1], absl::Seconds(1));
  EXPECT_EQ(totals[2], absl::Seconds(5));
}

TEST(StateClockTest, ReadingsIncludeTheCurrentStretchAndNeverGoBack) {
  StateClock clock(2, 1, kT0);
  EXPECT_EQ(clock.Totals(At(60))[1], absl::Seconds(60));  // still idle, shown while it lasts
  clock.Enter(0, At(10));
  clock.Enter(1, At(4));  // earlier than the last instant: counts as At(10)
  const std::vector<absl::Duration> totals = clock.Totals(At(12));
  EXPECT_EQ(totals[0], absl::ZeroDuration());
  EXPECT_EQ(totals[1], absl::Seconds(12));
}

TEST(SlotClockTest, BusyAndIdleAreSlotSeconds) {
  SlotClock clock(4, kT0);
  clock.Begin(At(0));
  clock.Begin(At(2));  // 2 s with one busy
  clock.End(At(6));    // 4 s with two busy
  clock.End(At(7));    // 1 s with one busy
  const SlotClock::Reading r = clock.Read(At(10));  // 3 s with none busy
  EXPECT_EQ(r.busy, absl::Seconds(2 + 8 + 1));
  EXPECT_EQ(r.idle, absl::Seconds(6 + 8 + 3 + 12));
  EXPECT_EQ(r.busy + r.idle, absl::Seconds(40));  // 4 slots x 10 s
}

TEST(SlotClockTest, WorkBeyondTheSlotsIsNotBusierAndUnmatchedEndsAreIgnored) {
  SlotClock clock(1, kT0);
  clock.Begin(At(0));
  clock.Begin(At(0));  // queued beyond the one slot
  clock.End(At(4));
  clock.End(At(4));
  clock.End(At(4));  // one End too many
  const SlotClock::Reading r = clock.Read(At(5));
  EXPECT_EQ(r.busy, absl::Seconds(4));
  EXPECT_EQ(r.idle, absl::Seconds(1));
}

}  // namespace
}  // namespace kforge
