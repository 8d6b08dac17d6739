// A job reads and writes only under the learner's roots: a JobSpec path
// outside them, written plainly, through `..` or through a symlink, is
// refused naming the field before anything under it is read, while the
// learner keeps serving.
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/client/rpc_client.h"
#include "kforge/v1/job_service.grpc.pb.h"
#include "tests/support/fixtures.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Roots: models/ and tasks/ of the test folder; outside/ is outside them.
class JobPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteCheckpointSkeleton(dir_.Sub("models/qwen"));
    testing::WriteTaskFolder(dir_.Sub("tasks/mini"));
    fs::create_directories(dir_.Sub("outside"));
    auto learner = testing::StartServiceProcess(
        "kforge-learner",
        {"--state_dir=" + dir_.Sub("state"), "--model_roots=" + dir_.Sub("models"),
         "--task_roots=" + dir_.Sub("tasks"), "--output_roots=" + dir_.Sub("outputs")},
        dir_.path());
    ASSERT_TRUE(learner.ok()) << learner.status();
    learner_ = std::move(*learner);
    stub_ = v1::JobService::NewStub(MakeChannel(learner_.address()));
  }

  v1::JobSpec Valid() const {
    return testing::ValidJobSpec(dir_.Sub("models/qwen"), dir_.Sub("tasks/mini"));
  }
  grpc::Status Submit(const v1::JobSpec& spec, v1::Job* job = nullptr) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(10));
    v1::Job ignored;
    return stub_->SubmitJob(&context, spec, job != nullptr ? job : &ignored);
  }
  void ExpectRefused(const v1::JobSpec& spec, const std::string& field) {
    const grpc::Status status = Submit(spec);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(field + ": "));
  }

  testing::TempDir dir_;
  testing::ServiceProcess learner_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

TEST_F(JobPathsTest, AValidModelCopiedOutsideTheRootsIsRefusedNamingTheField) {
  fs::copy(dir_.Sub("models/qwen"), dir_.Sub("outside/qwen"), fs::copy_options::recursive);
  v1::JobSpec spec = Valid();
  spec.set_model_path(dir_.Sub("outside/qwen"));
  ExpectRefused(spec, "spec.model_path");
  const grpc::Status status = Submit(spec);
  EXPECT_THAT(status.error_message(), HasSubstr("outside the learner's model roots"));
  // The same folder inside the roots is accepted.
  EXPECT_TRUE(Submit(Valid()).ok());
}

TEST_F(JobPathsTest, DotDotOutOfARootIsRefused) {
  fs::copy(dir_.Sub("models/qwen"), dir_.Sub("outside/qwen"), fs::copy_options::recursive);
  v1::JobSpec spec = Valid();
  spec.set_model_path(dir_.Sub("models/../outside/qwen"));
  ExpectRefused(spec, "spec.model_path");
  EXPECT_THAT(Submit(spec).error_message(), HasSubstr("resolves to " + dir_.Sub("outside/qwen")));
}

TEST_F(JobPathsTest, ASymlinkOutOfARootIsRefused) {
  fs::copy(dir_.Sub("models/qwen"), dir_.Sub("outside/qwen"), fs::copy_options::recursive);
  fs::create_directory_symlink(dir_.Sub("outside/qwen"), dir_.Sub("models/linked"));
  v1::JobSpec spec = Valid();
  spec.set_model_path(dir_.Sub("models/linked"));
  ExpectRefused(spec, "spec.model_path");
}

TEST_F(JobPathsTest, ASymlinkInsideAModelFolderPointingOutIsRefused) {
  testing::WriteFile(dir_.Sub("outside/secret"), "not a model");
  fs::remove(dir_.Sub("models/qwen/tokenizer.json"));
  fs::create_symlink(dir_.Sub("outside/secret"), dir_.Sub("models/qwen/tokenizer.json"));
  const grpc::Status status = Submit(Valid());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("spec.model_path: tokenizer.json in"));
}

TEST_F(JobPathsTest, TaskSetsAndCheckpointFoldersOutsideTheRootsAreRefused) {
  fs::copy(dir_.Sub("tasks/mini"), dir_.Sub("outside/mini"), fs::copy_options::recursive);
  v1::JobSpec tasks = Valid();
  tasks.mutable_tasks()->set_kernelbench_dir(dir_.Sub("outside/mini"));
  ExpectRefused(tasks, "spec.tasks.kernelbench_dir");
  v1::JobSpec jsonl = Valid();
  jsonl.mutable_tasks()->set_kernelbook_jsonl("/etc/passwd");
  ExpectRefused(jsonl, "spec.tasks.kernelbook_jsonl");
  v1::JobSpec checkpoints = Valid();
  checkpoints.mutable_checkpoint()->set_dir("/tmp/elsewhere");
  ExpectRefused(checkpoints, "spec.checkpoint.dir");
  v1::JobSpec relative = Valid();
  relative.mutable_checkpoint()->set_dir("../outside/checkpoints");  // from the state folder
  ExpectRefused(relative, "spec.checkpoint.dir");
  EXPECT_TRUE(WaitForServing(MakeChannel(learner_.address()), absl::Seconds(5)).ok());
}

TEST_F(JobPathsTest, TheJobRecordsThePathsAsResolved) {
  fs::create_directory_symlink(dir_.Sub("models/qwen"), dir_.Sub("models/current"));
  v1::JobSpec spec = Valid();
  spec.set_model_path(dir_.Sub("models/current"));
  spec.mutable_checkpoint()->set_dir(dir_.Sub("outputs/run-1"));
  v1::Job job;
  ASSERT_TRUE(Submit(spec, &job).ok());
  EXPECT_EQ(job.spec().model_path(), dir_.Sub("models/qwen"));
  EXPECT_EQ(job.spec().checkpoint().dir(), dir_.Sub("outputs/run-1"));
}

}  // namespace
}  // namespace kforge
