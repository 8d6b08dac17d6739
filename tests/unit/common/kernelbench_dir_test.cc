// KernelBench's problems are looked for in one order: KFORGE_KERNELBENCH_DIR,
// the copy scripts/fetch-kernelbench.sh fetches into the checkout, then
// ../shared/kernelbench beside the checkout.
#include "common/paths/kernelbench_dir.h"

#include <stdlib.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A checkout at <tmp>/repo, with the fetched copy and ../shared optional.
class KernelBenchDirTest : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("KFORGE_KERNELBENCH_DIR"); }
  void TearDown() override { ::unsetenv("KFORGE_KERNELBENCH_DIR"); }

  fs::path Checkout() const { return fs::path(dir_.Sub("repo")); }
  std::string Fetched() const { return dir_.Sub("repo/third_party/kernelbench/KernelBench"); }
  std::string Shared() const { return dir_.Sub("shared/kernelbench"); }
  std::string Own() const { return dir_.Sub("elsewhere/kb"); }
  static void MakeProblems(const std::string& dir) { fs::create_directories(dir + "/level1"); }

  testing::TempDir dir_;
};

TEST_F(KernelBenchDirTest, TheEnvironmentVariableComesFirst) {
  MakeProblems(Own());
  MakeProblems(Fetched());
  MakeProblems(Shared());
  ::setenv("KFORGE_KERNELBENCH_DIR", Own().c_str(), 1);
  absl::StatusOr<KernelBenchDir> found = FindKernelBenchDir(Checkout());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->path, Own());
  EXPECT_EQ(found->found_by, "KFORGE_KERNELBENCH_DIR");
}

TEST_F(KernelBenchDirTest, AVariableNamingNoProblemsIsAnErrorNotAFallback) {
  MakeProblems(Shared());
  ::setenv("KFORGE_KERNELBENCH_DIR", Own().c_str(), 1);
  absl::StatusOr<KernelBenchDir> found = FindKernelBenchDir(Checkout());
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(found.status().message(), HasSubstr(Own() + " holds no level1/"));
  EXPECT_THAT(found.status().message(), HasSubstr("scripts/fetch-kernelbench.sh"));
}

TEST_F(KernelBenchDirTest, TheFetchedCopyComesBeforeTheSharedOne) {
  MakeProblems(Fetched());
  MakeProblems(Shared());
  absl::StatusOr<KernelBenchDir> found = FindKernelBenchDir(Checkout());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->path, Fetched());
  EXPECT_EQ(found->found_by, "fetched copy");
}

TEST_F(KernelBenchDirTest, TheSharedCopyBesideTheCheckoutIsTheLastResort) {
  MakeProblems(Shared());
  absl::StatusOr<KernelBenchDir> found = FindKernelBenchDir(Checkout());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(fs::path(found->path).lexically_normal(), fs::path(Shared()).lexically_normal());
  EXPECT_EQ(found->found_by, "../shared/kernelbench");
}

TEST_F(KernelBenchDirTest, NoneFoundSaysWhereItLookedAndHowToGetThem) {
  fs::create_directories(Fetched());  // an empty export is not a copy
  absl::StatusOr<KernelBenchDir> found = FindKernelBenchDir(Checkout());
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(found.status().message(), HasSubstr(Fetched()));
  EXPECT_THAT(found.status().message(), HasSubstr("shared/kernelbench"));
  EXPECT_THAT(found.status().message(), HasSubstr(KernelBenchHowTo()));
}

}  // namespace
}  // namespace kforge
