// A Funnel shared by the tests of one suite (starting its zygote and
// reference server costs seconds), on the CPU (or a GPU, see
// GpuFunnelTest) with the harness from build/share/kforge/harness.
//
//   class MyTest : public kforge::testing::FunnelTest {};
//   TEST_F(MyTest, X) {
//     v1::Verdict v = Verify(ReadShared("level1/19_ReLU.py"), candidate_text);
//     EXPECT_TRUE(v.correct());
//   }
#ifndef KFORGE_TESTS_SUPPORT_FUNNEL_FIXTURE_H_
#define KFORGE_TESTS_SUPPORT_FUNNEL_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "kforge/v1/verdict.pb.h"
#include "kforge/v1/verifier_options.pb.h"
#include "kforge/v1/verifier_service.pb.h"
#include "verifier_worker/funnel/funnel.h"

namespace kforge::testing {

class FunnelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { StartFunnel("cpu"); }
  static void TearDownTestSuite();
  // Starts the shared funnel on `device`; on "cuda:N" only where the
  // interpreter has CUDA, Triton and a GPU N (else skip_reason_ says why).
  static void StartFunnel(const std::string& device, int spare_sandboxes = 1);
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  }

  // Verifies `completion` against the task source with test-sized options:
  // require_triton off (CPU), exactly 10 timed trials (no min_timed_ms),
  // 20 s correctness limit, no cache. `tweak` adjusts the options further.
  static v1::Verdict Verify(const std::string& task_source, const std::string& completion,
                            const std::function<void(v1::VerifierOptions&)>& tweak = {},
                            const std::function<void(v1::VerifyRequest&)>& request_tweak = {});

  // A task of ../shared/kernelbench ("level1/19_ReLU.py"); skips the test
  // with a message when the folder is absent.
  static std::string SharedTask(const std::string& relative);
  // A built-in task ("level1/1_ReLU.py" of kforge-mini).
  static std::string BuiltinTask(const std::string& relative);
  // A file under tests/data/verifier/.
  static std::string TestData(const std::string& relative);
  // A file of the repository ("tasks/kernelbench-solutions/level1/19_ReLU.py").
  static std::string ReadSource(const std::string& relative);

  static bool HasFlag(const v1::Verdict& verdict, v1::HackFlag flag);
  // The last stage's result.
  static const v1::StageResult& LastStage(const v1::Verdict& verdict);
  static std::string Describe(const v1::Verdict& verdict);

  static Funnel* funnel_;
  static std::string python_;  // the interpreter the funnel runs candidates with
  static std::string work_dir_;
  static std::string skip_reason_;
};

// A gtest parameter name from a candidate file: "kb_relu.py" -> "kb_relu".
std::string FileParamName(const std::string& file);

// The same on cuda:0 with Triton; every test skips with the reason where
// there is no GPU or no Triton.
class GpuFunnelTest : public FunnelTest {
 protected:
  static void SetUpTestSuite() { StartFunnel("cuda:0"); }
};

// On the second GPU, with no spare sandboxes (each candidate process started
// on demand): a verifier of any GPU but the first, where a process that had
// not made its device current launched Triton kernels on the first GPU's.
// Skips on a machine with fewer than two GPUs.
class SecondGpuFunnelTest : public FunnelTest {
 protected:
  static void SetUpTestSuite() { StartFunnel("cuda:1", /*spare_sandboxes=*/0); }
};

}  // namespace kforge::testing

#endif  // KFORGE_TESTS_SUPPORT_FUNNEL_FIXTURE_H_
