// The built-in task set and the example job are shipped files: they must
// load, validate and run.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/config/json_config.h"
#include "common/process/child_process.h"
#include "kforge/v1/job.pb.h"
#include "learner/tasks/task_set.h"
#include "tests/support/fixtures.h"
#include "verifier_worker/python/python_interpreter.h"

namespace kforge {
namespace {

std::string BuiltinRoot() {
  return (std::filesystem::path(KFORGE_TEST_BIN_DIR).parent_path() / "share/kforge/tasks").string();
}

TEST(BuiltinTasksTest, MiniSetLoadsFromBesideTheBinaries) {
  v1::TaskSetSpec spec;
  spec.set_builtin("kforge-mini");
  auto tasks = LoadTaskSet(spec, BuiltinRoot());
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_GE(tasks->size(), 5u);
  EXPECT_EQ(tasks->front().id(), "level1/1_ReLU");
}

// Each reference module imports, builds from get_init_inputs and runs on
// get_inputs under the verifier's interpreter.
TEST(BuiltinTasksTest, EveryReferenceRunsUnderPython) {
  auto python = FindPythonWithTorch("", absl::Seconds(120));
  ASSERT_TRUE(python.ok()) << python.status();
  v1::TaskSetSpec spec;
  spec.set_builtin("kforge-mini");
  absl::StatusOr<std::vector<v1::Task>> tasks = LoadTaskSet(spec, BuiltinRoot());
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  for (const v1::Task& task : *tasks) {
    auto child = ChildProcess::Spawn(
        {.argv = {python->path, "-c",
                  "import runpy, sys, torch\n"
                  "m = runpy.run_path(sys.argv[1])\n"
                  "out = m['Model'](*m['get_init_inputs']())(*m['get_inputs']())\n"
                  "assert isinstance(out, torch.Tensor) and torch.isfinite(out).all()\n",
                  task.origin()},
         .capture_output = true});
    ASSERT_TRUE(child.ok());
    auto exit = (*child)->WaitFor(absl::Seconds(120));
    ASSERT_TRUE(exit.ok());
    EXPECT_EQ(exit->code, 0) << task.id() << ": " << (*child)->output();
  }
}

TEST(ExampleJobTest, ParsesAndPassesFieldChecks) {
  auto text = ReadFileToString(std::string(KFORGE_TEST_SOURCE_DIR) + "/examples/job.json");
  ASSERT_TRUE(text.ok()) << text.status();
  v1::JobSpec spec;
  ASSERT_TRUE(ParseJsonMessage(*text, &spec).ok());
  EXPECT_TRUE(FinalizeConfig(&spec, "spec").ok());
  EXPECT_EQ(spec.tasks().builtin(), "kforge-mini");
}

}  // namespace
}  // namespace kforge
