#include "learner/jobs/path_roots.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class PathRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_.Sub("root/model"));
    fs::create_directories(dir_.Sub("outside"));
    testing::WriteFile(dir_.Sub("outside/secret"), "x");
  }
  PathRoots Roots() const { return PathRoots::Create({dir_.Sub("root") + "/"}, "model roots"); }
  testing::TempDir dir_;
};

TEST_F(PathRootsTest, APathInsideARootResolvesToItself) {
  auto path = Roots().Confine("spec.model_path", dir_.Sub("root/model"));
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir_.Sub("root/model"));
  EXPECT_TRUE(Roots().Confine("f", dir_.Sub("root")).ok()) << "the root itself";
  EXPECT_TRUE(Roots().Confine("f", dir_.Sub("root/not-yet/there")).ok()) << "a missing tail";
}

TEST_F(PathRootsTest, DotDotAndSiblingPrefixesStayOut) {
  auto up = Roots().Confine("spec.model_path", dir_.Sub("root/../outside/secret"));
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(up.status().message(), HasSubstr("spec.model_path: "));
  EXPECT_THAT(up.status().message(), HasSubstr("resolves to " + dir_.Sub("outside/secret")));
  fs::create_directories(dir_.Sub("root-other"));
  EXPECT_FALSE(Roots().Confine("f", dir_.Sub("root-other")).ok()) << "a name prefix is no parent";
}

TEST_F(PathRootsTest, SymlinksAreFollowedBeforeTheCheck) {
  fs::create_directory_symlink(dir_.Sub("outside"), dir_.Sub("root/escape"));
  EXPECT_FALSE(Roots().Confine("f", dir_.Sub("root/escape/secret")).ok());
  EXPECT_FALSE(Roots().Confine("f", dir_.Sub("root/escape/not-yet")).ok());
}

TEST_F(PathRootsTest, ATreeWithASymlinkPointingOutIsRefused) {
  EXPECT_TRUE(Roots().ConfineTree("spec.model_path", dir_.Sub("root/model")).ok());
  fs::create_symlink("../../outside/secret", dir_.Sub("root/model/weights.safetensors"));
  const absl::Status status = Roots().ConfineTree("spec.model_path", dir_.Sub("root/model"));
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("weights.safetensors in"));
  fs::remove(dir_.Sub("root/model/weights.safetensors"));
  fs::create_symlink("/nonexistent/later", dir_.Sub("root/model/dangling"));
  EXPECT_FALSE(Roots().ConfineTree("f", dir_.Sub("root/model")).ok())
      << "a dangling link is judged by where it points";
}

TEST_F(PathRootsTest, RelativePathsAreTakenFromTheBase) {
  auto inside = Roots().Confine("spec.checkpoint.dir", "model/ckpt", dir_.Sub("root"));
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(*inside, dir_.Sub("root/model/ckpt"));
  EXPECT_FALSE(Roots().Confine("spec.checkpoint.dir", "../outside", dir_.Sub("root")).ok());
}

TEST_F(PathRootsTest, NoRootsMeansNothingIsInside) {
  const PathRoots none = PathRoots::Create({}, "task roots");
  EXPECT_FALSE(none.Confine("f", dir_.Sub("root")).ok());
  EXPECT_EQ(Roots().Confine("f", "").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kforge
