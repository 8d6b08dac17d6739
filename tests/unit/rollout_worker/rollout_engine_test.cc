// The rollout worker's sampling loop on a `kforge tiny-model` checkpoint:
// work items become samples with the right ids, versions and log-probs; a
// re-issued group reproduces its completions; bad items are refused by name;
// and, with a real verifier process, every sample of the engine gets a
// verdict through the dispatcher.
#include "rollout_worker/sampler/rollout_engine.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "model/checkpoint/tiny_model.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/transformer/checkpoint_loader.h"
#include "rollout_worker/dispatch/verifier_dispatcher.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/tiny_checkpoint.h"
#include "tests/support/service_process.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

class RolloutEngineTest : public testing::TinyCheckpointSuite<Architecture::kQwen2, 0> {
 protected:
  void SetUp() override {
    model_ = *LoadDecoderModel(dir_->Sub("model"), {});
    tokenizer_ = *BpeTokenizer::FromFile(dir_->Sub("model/tokenizer.json"));
  }

  std::unique_ptr<RolloutEngine> NewEngine(RolloutEngine::SampleCallback on_sample = nullptr) {
    if (!on_sample) {
      on_sample = [this](v1::Sample s, const v1::WorkItem&, absl::Duration) {
        absl::MutexLock lock(&mu_);
        samples_[s.key().sample_id()] = std::move(s);
      };
    }
    auto engine = RolloutEngine::Create(
        model_.get(), tokenizer_.get(), {.worker_id = "w1", .slots = 8, .max_len = 128},
        std::move(on_sample), [this](const v1::WorkItem& item, const absl::Status& status) {
          absl::MutexLock lock(&mu_);
          dropped_.push_back(item.group_id() + ": " + std::string(status.message()));
        });
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  static v1::WorkItem Item(const std::string& group, int size) {
    v1::WorkItem item;
    item.set_job_id("job-1");
    item.set_group_id(group);
    item.mutable_task()->set_id("level1/1_ReLU");
    item.set_prompt_text("<|im_start|>user\nWrite a ReLU.<|im_end|>\n<|im_start|>assistant\n");
    item.set_group_size(size);
    item.mutable_sampling()->set_max_new_tokens(12);
    item.mutable_sampling()->set_seed(99);
    return item;
  }

  bool WaitForSamples(size_t count) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return samples_.size() >= count; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
  }

  std::map<std::string, v1::Sample> Samples() {
    absl::MutexLock lock(&mu_);
    return samples_;
  }

  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<BpeTokenizer> tokenizer_;
  absl::Mutex mu_;
  std::map<std::string, v1::Sample> samples_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> dropped_ ABSL_GUARDED_BY(mu_);
};

TEST_F(RolloutEngineTest, WorkItemsBecomeSamplesStampedWithIdsAndVersions) {
  std::unique_ptr<RolloutEngine> engine = NewEngine();
  ASSERT_TRUE(engine->Submit(Item("g1", 3)).ok());
  ASSERT_TRUE(WaitForSamples(3));
  engine->RunBetweenSteps([&] { engine->set_policy_version(5); });
  ASSERT_TRUE(engine->Submit(Item("g2", 2)).ok());
  ASSERT_TRUE(WaitForSamples(5));
  const std::map<std::string, v1::Sample> samples = Samples();
  const std::vector<int32_t> prompt = tokenizer_->Encode(Item("g1", 1).prompt_text());
  for (const auto& [id, s] : samples) {
    EXPECT_EQ(id, "job-1/" + s.key().group_id() + "/" + std::to_string(s.key().index_in_group()));
    EXPECT_EQ(s.policy_version(), s.key().group_id() == "g1" ? 0 : 5) << id;
    EXPECT_EQ(std::vector<int32_t>(s.prompt_tokens().begin(), s.prompt_tokens().end()), prompt);
    EXPECT_GE(s.completion_tokens_size(), 1) << id;
    EXPECT_EQ(s.completion_logprobs_size(), s.completion_tokens_size()) << id;
    EXPECT_FALSE(s.finish_reason().empty()) << id;
    EXPECT_EQ(s.rollout_worker_id(), "w1");
    EXPECT_EQ(s.task_id(), "level1/1_ReLU");
  }
  EXPECT_EQ(samples.size(), 5u);
  EXPECT_EQ(engine->groups_in_flight(), 0);
}

// A follow-up turn (TurnLoop): one sequence continuing a trajectory of a
// group whose first turn still runs beside it, stamped with the trajectory's
// index, its turn and the version the engine holds when it starts.
TEST_F(RolloutEngineTest, AFollowUpTurnIsSampledBesideItsGroupUnderTheCurrentVersion) {
  std::unique_ptr<RolloutEngine> engine = NewEngine();
  ASSERT_TRUE(engine->Submit(Item("g", 2)).ok());
  ASSERT_TRUE(WaitForSamples(2));
  engine->RunBetweenSteps([&] { engine->set_policy_version(3); });
  v1::WorkItem next = Item("g", 1);
  next.set_prompt_text(next.prompt_text() + "an answer<|im_end|>\n<|im_start|>user\nfeedback"
                       "<|im_end|>\n<|im_start|>assistant\n");
  next.set_turn(1);
  next.set_trajectory_index(1);
  ASSERT_TRUE(engine->Submit(next).ok());
  EXPECT_EQ(engine->Submit(next).code(), absl::StatusCode::kAlreadyExists);
  v1::WorkItem other = next;
  other.set_trajectory_index(0);
  ASSERT_TRUE(engine->Submit(other).ok());  // another trajectory's turn beside it
  ASSERT_TRUE(WaitForSamples(4));
  const std::map<std::string, v1::Sample> samples = Samples();
  ASSERT_TRUE(samples.count("job-1/g/1/t1"));
  const v1::Sample& turn = samples.at("job-1/g/1/t1");
  EXPECT_EQ(turn.key().group_id(), "g");
  EXPECT_EQ(turn.key().index_in_group(), 1);
  EXPECT_EQ(turn.key().turn(), 1);
  EXPECT_EQ(turn.policy_version(), 3);
  EXPECT_EQ(turn.prompt_text(), next.prompt_text());
  EXPECT_EQ(std::vector<int32_t>(turn.prompt_tokens().begin(), turn.prompt_tokens().end()),
            tokenizer_->Encode(next.prompt_text()));
  EXPECT_EQ(samples.at("job-1/g/1").key().turn(), 0);
  EXPECT_TRUE(samples.count("job-1/g/0/t1"));
}

TEST_F(RolloutEngineTest, AReissuedGroupReproducesItsCompletions) {
  std::unique_ptr<RolloutEngine> engine = NewEngine();
  ASSERT_TRUE(engine->Submit(Item("g", 2)).ok());
  ASSERT_TRUE(WaitForSamples(2));
  const std::map<std::string, v1::Sample> first = Samples();
  {
    absl::MutexLock lock(&mu_);
    samples_.clear();
  }
  ASSERT_TRUE(engine->Submit(Item("g", 2)).ok());
  ASSERT_TRUE(WaitForSamples(2));
  for (const auto& [id, s] : Samples()) {
    EXPECT_EQ(s.completion_text(), first.at(id).completion_text()) << id;
    EXPECT_THAT(s.completion_tokens(), ::testing::ElementsAreArray(first.at(id).completion_tokens()));
  }
}

TEST_F(RolloutEngineTest, UnusableWeightsDropEveryGroupUntilNewWeightsAreApplied) {
  // What a worker does when a broadcast receive failed and the gRPC repair
  // failed too: its parameters are a mix of two versions.
  std::unique_ptr<RolloutEngine> engine = NewEngine();
  absl::Notification dropped_all;
  engine->RunBetweenSteps([&] {
    engine->DropAll(absl::UnavailableError("weights unusable"));
    dropped_all.Notify();
  });
  ASSERT_TRUE(dropped_all.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(engine->Submit(Item("late", 2)).ok());
  auto dropped = [&] {
    absl::MutexLock lock(&mu_);
    return dropped_.size();
  };
  for (int i = 0; i < 300 && dropped() < 1; ++i) absl::SleepFor(absl::Milliseconds(10));
  {
    absl::MutexLock lock(&mu_);
    ASSERT_EQ(dropped_.size(), 1u);
    EXPECT_EQ(dropped_[0], "late: weights unusable");
  }
  EXPECT_TRUE(Samples().empty());
  EXPECT_EQ(engine->groups_in_flight(), 0);
  // New weights applied: groups are sampled again, under the new version.
  engine->RunBetweenSteps([&] { engine->set_policy_version(7); });
  ASSERT_TRUE(engine->Submit(Item("after", 2)).ok());
  ASSERT_TRUE(WaitForSamples(2));
  for (const auto& [id, sample] : Samples()) EXPECT_EQ(sample.policy_version(), 7) << id;
}

TEST_F(RolloutEngineTest, BadWorkItemsAreRefusedByName) {
  std::unique_ptr<RolloutEngine> engine = NewEngine();
  v1::WorkItem no_job = Item("a", 1);
  no_job.clear_job_id();
  EXPECT_THAT(engine->Submit(no_job).message(), HasSubstr("job_id"));
  EXPECT_THAT(engine->Submit(Item("b", 9)).message(), HasSubstr("group_size 9 outside [1, 8]"));
  v1::WorkItem bad_token = Item("c", 1);
  bad_token.add_prompt_tokens(1 << 20);
  EXPECT_THAT(engine->Submit(bad_token).message(), HasSubstr("prompt token 1048576"));
  v1::WorkItem bad_top_p = Item("d", 1);
  bad_top_p.mutable_sampling()->set_top_p(2.0);
  EXPECT_THAT(engine->Submit(bad_top_p).message(), HasSubstr("top_p"));
  v1::WorkItem empty = Item("e", 1);
  empty.clear_prompt_text();
  EXPECT_THAT(engine->Submit(empty).message(), HasSubstr("prompt"));
  v1::WorkItem slow = Item("f", 2);
  slow.mutable_sampling()->set_max_new_tokens(100);
  ASSERT_TRUE(engine->Submit(slow).ok());
  EXPECT_EQ(engine->Submit(slow).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(WaitForSamples(2));
}

TEST_F(RolloutEngineTest, EverySampleGetsAVerdictFromARealVerifier) {
  testing::ScratchDir work;
  auto verifier = testing::StartServiceProcess("kforge-verifier", {}, work.path());
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  absl::Mutex verdict_mu;
  std::map<std::string, v1::Verdict> verdicts;
  auto dispatcher = VerifierDispatcher::Create(
      {.target = verifier->address()}, [&](const v1::VerifyResponse& r) {
        absl::MutexLock lock(&verdict_mu);
        verdicts[r.request_id()] = r.verdict();
      });
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
  const std::string task = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                           "    def forward(self, x):\n        return torch.relu(x)\n\n"
                           "def get_inputs():\n    return [torch.randn(4, 8)]\n\n"
                           "def get_init_inputs():\n    return []\n";
  std::unique_ptr<RolloutEngine> engine =
      NewEngine([&](v1::Sample sample, const v1::WorkItem& item, absl::Duration) {
        v1::VerifyRequest request;
        request.set_request_id(sample.key().sample_id());
        *request.mutable_task() = item.task();
        request.mutable_task()->set_reference_source(task);
        request.set_completion(sample.completion_text());
        request.mutable_options()->set_require_triton(false);
        *request.mutable_sample() = std::move(sample);
        ASSERT_TRUE((*dispatcher)->Submit(std::move(request)).ok());
      });
  ASSERT_TRUE(engine->Submit(Item("v1", 4)).ok());
  ASSERT_TRUE(engine->Submit(Item("v2", 3)).ok());
  for (int i = 0; i < 600 && (*dispatcher)->stats().submitted < 7; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE((*dispatcher)->WaitIdle(absl::Seconds(120)));
  absl::MutexLock lock(&verdict_mu);
  ASSERT_EQ(verdicts.size(), 7u);
  // A random tiny model writes no ModelNew: each fails the static stage
  // with the reason, and none is lost.
  for (const auto& [id, verdict] : verdicts) {
    EXPECT_EQ(verdict.stage_reached(), v1::STAGE_STATIC) << id;
    ASSERT_GT(verdict.stages_size(), 0) << id;
    EXPECT_FALSE(verdict.stages(0).message().empty()) << id;
  }
}

}  // namespace
}  // namespace kforge
