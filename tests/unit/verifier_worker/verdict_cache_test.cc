// VerdictCache: duplicates of a candidate get its verdict, least recently
// used first out; a verdict that may be the verifier's load (a timeout, a
// failure of the timing clocks alone, outputs right, or a correct kernel
// timed far slower than eager) is kept only once
// the candidate got one at two moments (duplicates verified at once are
// one), so a duplicate is verified again at another moment.
#include "verifier_worker/funnel/verdict_cache.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

constexpr double kConfirmBelow = 0.1;  // TimingProtocol.confirm_speedup_below's default

v1::Verdict Passed() {
  v1::Verdict verdict;
  verdict.set_correct(true);
  v1::StageResult* stage = verdict.add_stages();
  stage->set_stage(v1::STAGE_TIMING);
  stage->set_outcome(v1::OUTCOME_PASSED);
  return verdict;
}

TEST(VerdictCacheTest, KeepsVerdictsAndDropsTheLeastRecentlyUsedFirst) {
  VerdictCache cache(2);
  cache.Put("a", Passed());
  cache.Put("b", Passed());
  ASSERT_TRUE(cache.Get("a").has_value());  // "b" is now the least recently used
  cache.Put("c", Passed());
  EXPECT_TRUE(cache.Get("a").has_value());
  EXPECT_FALSE(cache.Get("b").has_value());
  EXPECT_TRUE(cache.Get("c").has_value());
}

// What a clock alone judged, on outputs that were right: a busy host or a
// GPU shared with another process can do it.
v1::Verdict FailedByTheClocks(v1::HackFlag flag) {
  v1::Verdict verdict = Passed();
  verdict.mutable_stages(0)->set_outcome(v1::OUTCOME_FAILED);
  verdict.add_hack_flags(flag);
  return verdict;
}

TEST(VerdictCacheTest, ATimeoutOrAFailureOfTheClocksAloneMayBeTheVerifiersLoad) {
  EXPECT_FALSE(MayBeTheVerifiersLoad(Passed(), kConfirmBelow));

  v1::Verdict timed_out = Passed();
  timed_out.set_correct(false);
  timed_out.mutable_stages(0)->set_outcome(v1::OUTCOME_TIMED_OUT);
  EXPECT_TRUE(MayBeTheVerifiersLoad(timed_out, kConfirmBelow));

  EXPECT_TRUE(MayBeTheVerifiersLoad(FailedByTheClocks(v1::HACK_SIDE_STREAM), kConfirmBelow))
      << "host time far above event time";
  EXPECT_TRUE(MayBeTheVerifiersLoad(FailedByTheClocks(v1::HACK_RESULT_CACHING), kConfirmBelow))
      << "slow on a fresh input, with right outputs";
  EXPECT_TRUE(
      MayBeTheVerifiersLoad(FailedByTheClocks(v1::HACK_SPEEDUP_IMPLAUSIBLE), kConfirmBelow));

  v1::Verdict wrong_on_fresh = FailedByTheClocks(v1::HACK_RESULT_CACHING);
  wrong_on_fresh.set_correct(false);
  EXPECT_TRUE(MayBeTheVerifiersLoad(wrong_on_fresh, kConfirmBelow))
      << "a hack flag found at run time is confirmed, whatever the outputs";
  v1::Verdict wrong = Passed();
  wrong.set_correct(false);
  wrong.mutable_stages(0)->set_stage(v1::STAGE_TINY_RUN);
  wrong.mutable_stages(0)->set_outcome(v1::OUTCOME_FAILED);
  EXPECT_FALSE(MayBeTheVerifiersLoad(wrong, kConfirmBelow));
}

TEST(VerdictCacheTest, AHackFoundAtRunTimeIsConfirmedAndOneFoundStaticallyIsNot) {
  v1::Verdict at_run_time = Passed();
  at_run_time.set_correct(false);
  at_run_time.mutable_stages(0)->set_stage(v1::STAGE_MULTI_INPUT);
  at_run_time.mutable_stages(0)->set_outcome(v1::OUTCOME_FAILED);
  at_run_time.add_hack_flags(v1::HACK_PATCHED_FUNCTION);
  EXPECT_TRUE(MayBeTheVerifiersLoad(at_run_time, kConfirmBelow));
  EXPECT_TRUE(MayBeTheVerifiersLoad(at_run_time, 0.0)) << "not a speedup's confirmation";

  v1::Verdict statically = at_run_time;
  statically.mutable_stages(0)->set_stage(v1::STAGE_STATIC);
  EXPECT_FALSE(MayBeTheVerifiersLoad(statically, kConfirmBelow))
      << "the static check reads the source alone: the same every time";
  v1::Verdict no_flag = at_run_time;
  no_flag.clear_hack_flags();
  EXPECT_FALSE(MayBeTheVerifiersLoad(no_flag, kConfirmBelow)) << "a plain failure is its own";
}

TEST(VerdictCacheTest, ACorrectKernelFarSlowerThanEagerMayBeTheVerifiersLoad) {
  v1::Verdict slow = Passed();
  slow.set_speedup_vs_eager(0.006);  // a reference solution timed under a warm start's training
  EXPECT_TRUE(MayBeTheVerifiersLoad(slow, kConfirmBelow));
  EXPECT_FALSE(MayBeTheVerifiersLoad(slow, 0.0)) << "0: no confirmation";
  v1::Verdict usual = Passed();
  usual.set_speedup_vs_eager(0.5);
  EXPECT_FALSE(MayBeTheVerifiersLoad(usual, kConfirmBelow)) << "within the factor";
  v1::Verdict untimed = Passed();  // timing off: no speedup
  EXPECT_FALSE(MayBeTheVerifiersLoad(untimed, kConfirmBelow));
  v1::Verdict wrong = slow;
  wrong.set_correct(false);
  EXPECT_FALSE(MayBeTheVerifiersLoad(wrong, kConfirmBelow)) << "wrong outputs are its own";
}

TEST(VerdictCacheTest, AFailureUnderLoadCountsAtItsSecondMoment) {
  VerdictCache cache(4);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(cache.FailedUnderLoadBefore("a", t0, t0 + absl::Seconds(5)))
      << "the first: verify duplicates again";
  EXPECT_TRUE(cache.FailedUnderLoadBefore("a", t0 + absl::Seconds(6), t0 + absl::Seconds(9)))
      << "again, begun after the first had ended: the candidate's own";
  EXPECT_FALSE(cache.FailedUnderLoadBefore("b", t0 + absl::Seconds(6), t0 + absl::Seconds(9)))
      << "per candidate";
}

TEST(VerdictCacheTest, DuplicatesVerifiedAtOnceAreOneMoment) {
  VerdictCache cache(4);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  // Two duplicates verified side by side under one load, both failed.
  EXPECT_FALSE(cache.FailedUnderLoadBefore("a", t0, t0 + absl::Seconds(5)));
  EXPECT_FALSE(cache.FailedUnderLoadBefore("a", t0 + absl::Seconds(1), t0 + absl::Seconds(6)))
      << "begun before the first ended: the same moment";
  EXPECT_TRUE(cache.FailedUnderLoadBefore("a", t0 + absl::Seconds(7), t0 + absl::Seconds(9)))
      << "a third, begun after the first ended";
}

TEST(VerdictCacheTest, ACacheOfNoCapacityKeepsNothing) {
  VerdictCache cache(0);
  cache.Put("a", Passed());
  EXPECT_FALSE(cache.Get("a").has_value());
}

}  // namespace
}  // namespace kforge
