#include "learner/tasks/task_set.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Ids(const std::vector<v1::Task>& tasks) {
  std::vector<std::string> ids;
  for (const auto& t : tasks) ids.push_back(t.id());
  return ids;
}

TEST(TaskSetTest, LoadsKernelBenchLayoutWithSolutions) {
  testing::TempDir dir;
  testing::WriteTaskFolder(dir.path());
  v1::TaskSetSpec spec;
  spec.set_kernelbench_dir(dir.path());
  auto tasks = LoadTaskSet(spec, "");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_THAT(Ids(*tasks), ElementsAre("level1/1_Relu", "level1/2_Scale", "level2/1_ReluScale"));
  EXPECT_EQ((*tasks)[0].name(), "Relu");
  EXPECT_EQ((*tasks)[0].level(), 1);
  EXPECT_THAT((*tasks)[0].reference_source(), HasSubstr("class Model"));
  EXPECT_TRUE((*tasks)[0].reference_solution().empty());
  EXPECT_THAT((*tasks)[1].reference_solution(), HasSubstr("class ModelNew"));
  EXPECT_EQ((*tasks)[2].level(), 2);
}

TEST(TaskSetTest, FiltersByLevelAndGlobs) {
  testing::TempDir dir;
  testing::WriteTaskFolder(dir.path());
  v1::TaskSetSpec spec;
  spec.set_kernelbench_dir(dir.path());
  spec.add_levels(1);
  spec.add_exclude("*Scale");
  EXPECT_THAT(Ids(*LoadTaskSet(spec, "")), ElementsAre("level1/1_Relu"));
  spec.clear_levels();
  spec.clear_exclude();
  spec.add_include("level2/*");
  EXPECT_THAT(Ids(*LoadTaskSet(spec, "")), ElementsAre("level2/1_ReluScale"));
}

TEST(TaskSetTest, EmptyAfterFiltersIsAnError) {
  testing::TempDir dir;
  testing::WriteTaskFolder(dir.path());
  v1::TaskSetSpec spec;
  spec.set_kernelbench_dir(dir.path());
  spec.add_levels(3);
  EXPECT_THAT(std::string(LoadTaskSet(spec, "").status().message()), HasSubstr("no task found"));
}

TEST(TaskSetTest, MissingFolderNamesIt) {
  v1::TaskSetSpec spec;
  spec.set_kernelbench_dir("/nonexistent/tasks");
  EXPECT_THAT(std::string(LoadTaskSet(spec, "").status().message()),
              HasSubstr("/nonexistent/tasks: task folder does not exist"));
}

TEST(TaskSetTest, UnsetSourceIsAnError) {
  EXPECT_THAT(std::string(LoadTaskSet(v1::TaskSetSpec(), "").status().message()),
              HasSubstr("set one of kernelbench_dir, kernelbook_jsonl or builtin"));
}

TEST(TaskSetTest, LoadsKernelBookJsonlAndReportsBadLine) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("book.jsonl"),
                     R"({"python_code": "class Model: pass", "triton_code": "class ModelNew: pass", "entry_point": "Foo"})"
                     "\n\n"
                     R"({"python_code": "class Model: pass", "level": 2})"
                     "\n");
  v1::TaskSetSpec spec;
  spec.set_kernelbook_jsonl(dir.Sub("book.jsonl"));
  auto tasks = LoadTaskSet(spec, "");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_THAT(Ids(*tasks), ElementsAre("level1/Foo", "level2/line3"));
  EXPECT_EQ((*tasks)[0].reference_solution(), "class ModelNew: pass");

  testing::WriteFile(dir.Sub("bad.jsonl"), "{\"triton_code\": \"x\"}\n");
  spec.set_kernelbook_jsonl(dir.Sub("bad.jsonl"));
  EXPECT_THAT(std::string(LoadTaskSet(spec, "").status().message()),
              HasSubstr("bad.jsonl:1: missing \"python_code\""));
}

TEST(TaskSetTest, BuiltinResolvesUnderRootAndRejectsPaths) {
  testing::TempDir root;
  testing::WriteTaskFolder(root.Sub("mini"));
  v1::TaskSetSpec spec;
  spec.set_builtin("mini");
  EXPECT_TRUE(LoadTaskSet(spec, root.path()).ok());
  spec.set_builtin("../mini");
  EXPECT_THAT(std::string(LoadTaskSet(spec, root.path()).status().message()),
              HasSubstr("is not a built-in set name"));
  spec.set_builtin("other");
  EXPECT_THAT(std::string(LoadTaskSet(spec, root.path()).status().message()),
              HasSubstr("no built-in task set \"other\""));
}

TEST(TaskSetTest, LoadsSharedKernelBenchLevels) {
  const std::string shared = testing::SharedKernelBenchDir();
  if (shared.empty()) GTEST_SKIP() << testing::kNoKernelBench;
  v1::TaskSetSpec spec;
  spec.set_kernelbench_dir(shared);
  auto count_files = [&](const std::string& level) {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(shared + "/" + level)) {
      n += e.path().extension() == ".py";
    }
    return n;
  };
  auto tasks = LoadTaskSet(spec, "");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_EQ(tasks->size(), count_files("level1") + count_files("level2"));
  spec.add_levels(2);
  EXPECT_EQ(LoadTaskSet(spec, "")->size(), count_files("level2"));
}

}  // namespace
}  // namespace kforge
