// VerdictCache: duplicates of a candidate get its verdict, least recently
// used first out; a verdict that may be the verifier's load (a timeout, a
// host clock far above the events') is kept only the second time the
// candidate gets one, so a duplicate is verified again at another moment.
#include "verifier_worker/funnel/verdict_cache.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

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

TEST(VerdictCacheTest, ATimeoutOrAHostClockFarAboveTheEventsMayBeTheVerifiersLoad) {
  EXPECT_FALSE(MayBeTheVerifiersLoad(Passed()));

  v1::Verdict timed_out = Passed();
  timed_out.set_correct(false);
  timed_out.mutable_stages(0)->set_outcome(v1::OUTCOME_TIMED_OUT);
  EXPECT_TRUE(MayBeTheVerifiersLoad(timed_out));

  v1::Verdict side_stream = Passed();
  side_stream.set_correct(false);
  side_stream.mutable_stages(0)->set_outcome(v1::OUTCOME_FAILED);
  side_stream.add_hack_flags(v1::HACK_SIDE_STREAM);
  EXPECT_TRUE(MayBeTheVerifiersLoad(side_stream));

  v1::Verdict wrong = Passed();
  wrong.set_correct(false);
  wrong.mutable_stages(0)->set_stage(v1::STAGE_TINY_RUN);
  wrong.mutable_stages(0)->set_outcome(v1::OUTCOME_FAILED);
  EXPECT_FALSE(MayBeTheVerifiersLoad(wrong)) << "wrong outputs are the candidate's own";
  v1::Verdict implausible = Passed();
  implausible.add_hack_flags(v1::HACK_SPEEDUP_IMPLAUSIBLE);
  EXPECT_FALSE(MayBeTheVerifiersLoad(implausible));
}

TEST(VerdictCacheTest, AFailureUnderLoadCountsOnlyTheSecondTime) {
  VerdictCache cache(4);
  EXPECT_FALSE(cache.FailedUnderLoadBefore("a")) << "the first: verify duplicates again";
  EXPECT_TRUE(cache.FailedUnderLoadBefore("a")) << "the second: the candidate's own";
  EXPECT_FALSE(cache.FailedUnderLoadBefore("b")) << "per candidate";
}

TEST(VerdictCacheTest, ACacheOfNoCapacityKeepsNothing) {
  VerdictCache cache(0);
  cache.Put("a", Passed());
  EXPECT_FALSE(cache.Get("a").has_value());
}

}  // namespace
}  // namespace kforge
