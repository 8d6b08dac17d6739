#include "tests/support/funnel_fixture.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "tests/support/fixtures.h"
#include "verifier_worker/python/python_interpreter.h"
#include "verifier_worker/verifier_service.h"

namespace kforge::testing {

namespace fs = std::filesystem;

Funnel* FunnelTest::funnel_ = nullptr;
std::string FunnelTest::python_;
std::string FunnelTest::work_dir_;
std::string FunnelTest::skip_reason_;

namespace {

// CUDA devices `python`'s torch sees; 0 when it cannot say.
int CudaDeviceCount(const std::string& python) {
  const std::string command =
      absl::StrCat(python, " -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null");
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return 0;
  int count = 0;
  if (std::fscanf(pipe, "%d", &count) != 1) count = 0;
  ::pclose(pipe);
  return count;
}

}  // namespace

void FunnelTest::StartFunnel(const std::string& device, int spare_sandboxes) {
  skip_reason_.clear();
  absl::StatusOr<PythonInfo> python = FindPythonWithTorch("", absl::Seconds(120));
  ASSERT_TRUE(python.ok()) << python.status();
  if (device != "cpu" && (!python->cuda_available || python->triton_version.empty())) {
    skip_reason_ = absl::StrCat("needs a GPU and Triton; ", python->path, " has CUDA ",
                                python->cuda_available ? "yes" : "no", ", Triton ",
                                python->triton_version.empty() ? "absent" : python->triton_version);
    return;
  }
  if (absl::StartsWith(device, "cuda:")) {
    const int index = std::atoi(device.c_str() + 5);
    if (const int count = CudaDeviceCount(python->path); index >= count) {
      skip_reason_ = absl::StrCat("needs ", index + 1, " GPUs; ", python->path, " sees ", count);
      return;
    }
  }
  python_ = python->path;
  work_dir_ = (fs::temp_directory_path() / absl::StrCat("kforge-funnel-test-", ::getpid())).string();
  absl::StatusOr<std::unique_ptr<Funnel>> funnel = Funnel::Create(
      {.harness = {.python = python->path,
                   .harness_dir = (fs::path(KFORGE_TEST_BIN_DIR).parent_path() / "share/kforge/harness").string(),
                   .log_dir = work_dir_ + "/logs",
                   .device = device},
       .work_dir = work_dir_ + "/candidates",
       .max_concurrent = 2,
       .cache_entries = 100,
       // Every verifier test goes through a spare sandbox where one is
       // ready, the way the service runs (unless a suite asks for none).
       .spare_sandboxes = spare_sandboxes},
      nullptr);
  ASSERT_TRUE(funnel.ok()) << funnel.status();
  funnel_ = funnel->release();
}

void FunnelTest::TearDownTestSuite() {
  delete funnel_;
  funnel_ = nullptr;
  std::error_code ec;
  fs::remove_all(work_dir_, ec);
}

v1::Verdict FunnelTest::Verify(const std::string& task_source, const std::string& completion,
                               const std::function<void(v1::VerifierOptions&)>& tweak,
                               const std::function<void(v1::VerifyRequest&)>& request_tweak) {
  v1::VerifyRequest request;
  request.set_request_id("test");
  request.mutable_task()->set_reference_source(task_source);
  request.set_completion(completion);
  v1::VerifierOptions& options = *request.mutable_options();
  options.set_require_triton(false);
  options.set_use_cache(false);
  options.mutable_timing()->set_trials(10);
  options.mutable_timing()->set_warmup_trials(1);
  options.mutable_timing()->set_interleave_block(5);
  options.mutable_timing()->set_min_timed_ms(0);  // exactly 10 trials
  options.mutable_timing()->set_max_trials(10);
  options.mutable_limits()->set_correctness_timeout_s(20);
  options.mutable_limits()->set_timing_timeout_s(30);
  if (tweak) tweak(options);
  if (request_tweak) request_tweak(request);
  absl::Status prepared = PrepareVerifyRequest(request);
  EXPECT_TRUE(prepared.ok()) << prepared;
  return funnel_->Verify(request);
}

std::string FunnelTest::SharedTask(const std::string& relative) {
  const std::string dir = SharedKernelBenchDir();
  if (dir.empty()) return "";
  absl::StatusOr<std::string> text = ReadFileToString(dir + "/" + relative);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

std::string FunnelTest::BuiltinTask(const std::string& relative) {
  absl::StatusOr<std::string> text =
      ReadFileToString(std::string(KFORGE_TEST_SOURCE_DIR) + "/tasks/kforge-mini/" + relative);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

std::string FunnelTest::ReadSource(const std::string& relative) {
  absl::StatusOr<std::string> text =
      ReadFileToString(std::string(KFORGE_TEST_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

std::string FunnelTest::TestData(const std::string& relative) {
  absl::StatusOr<std::string> text =
      ReadFileToString(std::string(KFORGE_TEST_SOURCE_DIR) + "/tests/data/verifier/" + relative);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

std::string FileParamName(const std::string& file) {
  std::string name = file.substr(0, file.rfind('.'));
  for (char& c : name) {
    if (!absl::ascii_isalnum(c)) c = '_';
  }
  return name;
}

bool FunnelTest::HasFlag(const v1::Verdict& verdict, v1::HackFlag flag) {
  for (int f : verdict.hack_flags()) {
    if (f == flag) return true;
  }
  return false;
}

const v1::StageResult& FunnelTest::LastStage(const v1::Verdict& verdict) {
  static const v1::StageResult kNone;
  return verdict.stages().empty() ? kNone : *verdict.stages().rbegin();
}

std::string FunnelTest::Describe(const v1::Verdict& verdict) {
  v1::Verdict copy = verdict;
  copy.clear_extracted_code();
  return ToJson(copy);
}

}  // namespace kforge::testing
