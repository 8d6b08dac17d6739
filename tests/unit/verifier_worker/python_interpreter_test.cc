#include "verifier_worker/python/python_interpreter.h"

#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

TEST(PythonInterpreterTest, FindsAnInterpreterWithTorch) {
  absl::StatusOr<PythonInfo> info = FindPythonWithTorch("", absl::Seconds(120));
  ASSERT_TRUE(info.ok()) << info.status()
                         << " (the test command installs python3-torch; is it there?)";
  EXPECT_FALSE(info->torch_version.empty());
  EXPECT_FALSE(info->python_version.empty());
}

TEST(PythonInterpreterTest, ConfiguredPathThatDoesNotExistIsNamed) {
  absl::StatusOr<PythonInfo> info = FindPythonWithTorch("/nonexistent/python3", absl::Seconds(5));
  EXPECT_EQ(info.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(info.status().message()),
              HasSubstr("/nonexistent/python3: not an executable file"));
}

TEST(PythonInterpreterTest, InterpreterWithoutTorchReportsItsError) {
  testing::TempDir dir;
  const std::string fake = dir.Sub("python3");
  testing::WriteFile(fake,
                     "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\n"
                     "echo \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n");
  ::chmod(fake.c_str(), 0755);
  absl::StatusOr<PythonInfo> info = FindPythonWithTorch(fake, absl::Seconds(5));
  ASSERT_FALSE(info.ok());
  EXPECT_THAT(std::string(info.status().message()), HasSubstr(fake));
  EXPECT_THAT(std::string(info.status().message()),
              HasSubstr("No module named 'torch'"));
  EXPECT_THAT(std::string(info.status().message()), HasSubstr("Set the verifier's `python`"));
}

}  // namespace
}  // namespace kforge
