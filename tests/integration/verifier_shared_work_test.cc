// The verifier's shared reference work and run-time attribution, on the CPU
// funnel: a task's reference epoch (secret seeds, reference outputs) serves
// every candidate of a batch and is redrawn for the next; baselines are
// measured once and re-checked; verdicts do not depend on whether the caches
// were cold or warm; the next batch's epoch is made ahead when a candidate
// names it; what forward ran is recorded, and library compute fails
// a candidate when attribution is enforced, unless the task allows it.
#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/funnel_fixture.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

class VerifierSharedWorkTest : public testing::FunnelTest {
 protected:
  // The built-in ReLU task, made distinct by a comment so this test's caches
  // start cold whatever ran before it in the suite.
  static std::string FreshReluTask() {
    static std::atomic<int> n{0};
    return absl::StrCat(BuiltinTask("level1/1_ReLU.py"), "\n# variant ", n.fetch_add(1),
                        " of ", ::getpid(), "\n");
  }
  static v1::Verdict VerifyInBatch(const std::string& task, const std::string& file,
                                   const std::string& batch,
                                   const std::function<void(v1::VerifierOptions&)>& tweak = {}) {
    return Verify(task, TestData("cpu/" + file), tweak,
                  [&](v1::VerifyRequest& r) { r.set_batch_id(batch); });
  }
  // What may differ between two verifications of one candidate in one
  // reference epoch: measured times and wall times, and whether the
  // reference and baselines came from a cache.
  static v1::Verdict WithoutMeasurements(v1::Verdict verdict) {
    verdict.clear_candidate_timing();
    verdict.clear_eager_timing();
    verdict.clear_compile_timing();
    verdict.clear_speedup_vs_eager();
    verdict.clear_speedup_vs_compile();
    verdict.clear_total_seconds();
    verdict.clear_device_wait_seconds();
    verdict.clear_queue_seconds();
    verdict.clear_reference_seconds();
    verdict.clear_reference_reused();
    verdict.clear_baselines_cached();
    verdict.clear_fresh_input_ms();
    for (v1::StageResult& stage : *verdict.mutable_stages()) {
      stage.clear_seconds();
      stage.clear_part_seconds();
    }
    for (v1::InputSetResult& set : *verdict.mutable_input_sets()) {
      set.clear_seconds();
      set.clear_call_seconds();
      set.clear_compare_seconds();
    }
    for (v1::Launch& launch : *verdict.mutable_attribution()->mutable_launches()) {
      launch.clear_gpu_us();
    }
    return verdict;
  }
};

TEST_F(VerifierSharedWorkTest, ABatchSharesOneReferenceEpochAndTheNextBatchDrawsANewOne) {
  const std::string task = FreshReluTask();
  const v1::Verdict first = VerifyInBatch(task, "relu_clamp.py", "v1");
  const v1::Verdict second = VerifyInBatch(task, "relu_clamp.py", "v1");
  const v1::Verdict next = VerifyInBatch(task, "relu_clamp.py", "v2");
  ASSERT_TRUE(first.correct()) << Describe(first);
  EXPECT_FALSE(first.reference_reused());
  EXPECT_TRUE(second.reference_reused()) << Describe(second);
  EXPECT_FALSE(next.reference_reused()) << "a new batch must not reuse the old seeds";
  EXPECT_TRUE(next.correct()) << Describe(next);
}

TEST_F(VerifierSharedWorkTest, TheNextBatchsEpochIsMadeAheadWhenACandidateNamesIt) {
  const std::string task = FreshReluTask();
  const v1::Verdict first =
      Verify(task, TestData("cpu/relu_clamp.py"), {}, [](v1::VerifyRequest& r) {
        r.set_batch_id("job/v8");
        r.set_next_batch_id("job/v12");
      });
  ASSERT_TRUE(first.correct()) << Describe(first);
  EXPECT_FALSE(first.reference_reused());
  for (int i = 0; i < 1200 && funnel_->reference_prefetches_pending() > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_EQ(funnel_->reference_prefetches_pending(), 0) << "the make ahead did not finish in 60 s";
  const v1::Verdict next = VerifyInBatch(task, "relu_clamp.py", "job/v12");
  EXPECT_TRUE(next.reference_reused()) << "the next batch's first candidate found no epoch made ahead";
  EXPECT_TRUE(next.correct()) << Describe(next);
  // A batch no candidate named ahead is made when its first candidate comes.
  EXPECT_FALSE(VerifyInBatch(task, "relu_clamp.py", "job/v16").reference_reused());
}

TEST_F(VerifierSharedWorkTest, AnEpochServesAtMostItsCandidateBudget) {
  const std::string task = FreshReluTask();
  const auto two = [](v1::VerifierOptions& o) {
    o.mutable_multi_input()->set_reference_reuse_candidates(2);
  };
  EXPECT_FALSE(VerifyInBatch(task, "relu_clamp.py", "", two).reference_reused());
  EXPECT_TRUE(VerifyInBatch(task, "relu_clamp.py", "", two).reference_reused());
  EXPECT_FALSE(VerifyInBatch(task, "relu_clamp.py", "", two).reference_reused());
}

TEST_F(VerifierSharedWorkTest, BaselinesAreMeasuredOnceThenServedAfterADriftReCheck) {
  // A drift tolerance no loaded CI host can exceed: the re-check runs and
  // the cached baseline is served.
  const auto lenient = [](v1::VerifierOptions& o) { o.mutable_timing()->set_drift_tolerance(10); };
  const std::string task = FreshReluTask();
  const v1::Verdict first = VerifyInBatch(task, "relu_clamp.py", "b", lenient);
  const v1::Verdict second = VerifyInBatch(task, "relu_clamp.py", "b", lenient);
  ASSERT_EQ(first.stage_reached(), v1::STAGE_TIMING) << Describe(first);
  EXPECT_FALSE(first.baselines_cached());
  EXPECT_GT(first.eager_timing().trials(), 0);
  EXPECT_TRUE(second.baselines_cached()) << Describe(second);
  EXPECT_EQ(second.eager_timing().mean_ms(), first.eager_timing().mean_ms());
  EXPECT_GT(second.speedup_vs_eager(), 0) << Describe(second);
  // Another timing protocol is another measurement.
  const v1::Verdict other = VerifyInBatch(task, "relu_clamp.py", "b", [&](v1::VerifierOptions& o) {
    lenient(o);
    o.mutable_timing()->set_trials(12);
    o.mutable_timing()->set_max_trials(12);
  });
  EXPECT_FALSE(other.baselines_cached()) << Describe(other);
}

TEST_F(VerifierSharedWorkTest, VerdictsAreTheSameWithCachesColdAndWarm) {
  const std::string task = FreshReluTask();
  const std::vector<std::string> candidates = {
      "relu_clamp.py",     "identity_relu.py",    "constant_output.py", "input_mutation.py",
      "exact_shape_only.py", "cached_output.py", "tensor_arithmetic_relu.py", "wrong_dtype.py"};
  // Each candidate in a batch of its own: its first verification computes
  // the epoch (cold), its second reuses it (warm); baselines likewise go
  // from measured to cached.
  const auto lenient = [](v1::VerifierOptions& o) { o.mutable_timing()->set_drift_tolerance(10); };
  std::vector<v1::Verdict> cold;
  for (size_t i = 0; i < candidates.size(); ++i) {
    cold.push_back(VerifyInBatch(task, candidates[i], absl::StrCat("batch-", i), lenient));
    EXPECT_FALSE(cold.back().reference_reused()) << candidates[i];
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    const v1::Verdict warm = VerifyInBatch(task, candidates[i], absl::StrCat("batch-", i), lenient);
    EXPECT_TRUE(warm.reference_reused()) << candidates[i];
    std::string differences;
    google::protobuf::util::MessageDifferencer differ;
    differ.ReportDifferencesToString(&differences);
    EXPECT_TRUE(differ.Compare(WithoutMeasurements(cold[i]), WithoutMeasurements(warm)))
        << candidates[i] << " changed between a cold and a warm cache:\n" << differences;
  }
  EXPECT_TRUE(cold[0].correct()) << Describe(cold[0]);
  EXPECT_FALSE(cold[0].baselines_cached()) << "the first timed candidate measured them";
}

TEST_F(VerifierSharedWorkTest, EnforcedAttributionFailsTensorArithmeticWhateverItsSource) {
  const v1::Verdict verdict =
      VerifyInBatch(FreshReluTask(), "tensor_arithmetic_relu.py", "", [](v1::VerifierOptions& o) {
        o.set_attribution(v1::ATTRIBUTION_ENFORCE);
      });
  EXPECT_FALSE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.stages(0).outcome(), v1::OUTCOME_PASSED) << "passes the static check";
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_TINY_RUN) << Describe(verdict);
  EXPECT_TRUE(HasFlag(verdict, v1::HACK_TORCH_FALLBACK)) << Describe(verdict);
  EXPECT_THAT(LastStage(verdict).message(), HasSubstr("aten::mul"));
  EXPECT_TRUE(verdict.attribution().enforced());
}

TEST_F(VerifierSharedWorkTest, ReportedAttributionListsEveryOperatorWithItsOrigin) {
  // require_triton off and attribution AUTO: recorded, not enforced.
  const v1::Verdict verdict = VerifyInBatch(FreshReluTask(), "tensor_arithmetic_relu.py", "");
  ASSERT_TRUE(verdict.correct()) << Describe(verdict);
  EXPECT_FALSE(verdict.attribution().enforced());
  EXPECT_GE(verdict.attribution().runs(), 2) << "the tiny run and each input set are recorded";
  bool saw_mul = false;
  for (const v1::Launch& launch : verdict.attribution().launches()) {
    if (launch.name() == "aten::mul") {
      saw_mul = true;
      EXPECT_EQ(launch.origin(), v1::LAUNCH_LIBRARY_COMPUTE);
      EXPECT_GE(launch.calls(), verdict.attribution().runs());
    }
  }
  EXPECT_TRUE(saw_mul) << Describe(verdict);
}

TEST_F(VerifierSharedWorkTest, ATaskCanAllowTheLibraryWorkItNeeds) {
  const auto enforce = [](v1::VerifierOptions& o) { o.set_attribution(v1::ATTRIBUTION_ENFORCE); };
  const std::string task = FreshReluTask();
  const v1::Verdict refused = VerifyInBatch(task, "relu_clamp.py", "", enforce);
  EXPECT_FALSE(refused.correct());
  EXPECT_TRUE(HasFlag(refused, v1::HACK_TORCH_FALLBACK)) << Describe(refused);
  const v1::Verdict allowed =
      Verify(task, TestData("cpu/relu_clamp.py"), enforce, [](v1::VerifyRequest& r) {
        r.mutable_task()->add_allowed_library_ops("aten::clamp");
        r.mutable_task()->add_allowed_library_ops("aten::clamp_min");
      });
  EXPECT_TRUE(allowed.correct()) << Describe(allowed);
  EXPECT_EQ(allowed.hack_flags_size(), 0) << Describe(allowed);
}

}  // namespace
}  // namespace kforge
