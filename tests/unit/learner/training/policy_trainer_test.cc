// The trainer end to end on a tiny model on the CPU: GRPO and best-of-N
// raise a simple verifiable reward to at least 0.9, and a run checkpointed,
// dropped and resumed continues exactly where it stopped.
#include "learner/training/policy_trainer.h"

#include <algorithm>
#include <map>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "learner/checkpoint/training_checkpoint.h"
#include "model/generation/generator.h"
#include "model/policy_loader.h"
#include "model/torch_runtime.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/transformer/decoder_model.h"
#include "tests/support/tiny_checkpoint.h"

namespace kforge {
namespace {

constexpr int kPrompts = 4;
constexpr int kGroupSize = 8;
constexpr int kNewTokens = 6;

// The verifiable reward: the share of generated tokens (EOS excluded) with
// an even id. A random model starts near 0.5.
double EvenShare(const GeneratedSample& s, int32_t eos) {
  int even = 0;
  for (int32_t t : s.tokens) even += (t != eos && t % 2 == 0) ? 1 : 0;
  return static_cast<double>(even) / kNewTokens;
}

class TrainerLearningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    dir_ = testing::WriteTinyCheckpoint();
    auto loaded = LoadPolicy(dir_->Sub("model"), "cpu", "float32");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    policy_ = *std::move(loaded);
    eos_ = static_cast<int32_t>(policy_->model->config().eos_token_ids.front());
  }

  // Samples kPrompts groups, returns their mean reward and fills the
  // training batch (GRPO advantages, or the best samples for best-of-N).
  double SampleStep(int step, bool best_of_n, std::vector<TrainSequence>* batch) {
    auto gen = Generator::Create(policy_->model.get(), policy_->tokenizer.get(),
                                 {.slots = kPrompts * kGroupSize, .max_len = 64});
    EXPECT_TRUE(gen.ok());
    for (int p = 0; p < kPrompts; ++p) {
      GroupRequest request{.group_id = "g" + std::to_string(p),
                           .prompt_tokens = policy_->tokenizer->Encode("def f" + std::to_string(p))};
      for (int i = 0; i < kGroupSize; ++i) {
        request.samples.push_back({.seed = static_cast<uint64_t>(step * 1000 + p * 100 + i)});
      }
      request.stop.max_new_tokens = kNewTokens;
      EXPECT_TRUE((*gen)->Enqueue(request).ok());
    }
    std::map<std::string, std::vector<GeneratedSample>> groups;
    while (!(*gen)->idle()) {
      auto done = (*gen)->Step();
      EXPECT_TRUE(done.ok()) << done.status();
      for (GeneratedSample& s : *done) groups[s.group_id].push_back(std::move(s));
    }
    double total = 0;
    int count = 0;
    for (auto& [id, samples] : groups) {
      const int p = std::stoi(id.substr(1));
      std::vector<double> rewards;
      for (const GeneratedSample& s : samples) rewards.push_back(EvenShare(s, eos_));
      for (double r : rewards) total += r, ++count;
      const std::vector<double> adv = GroupAdvantages(rewards, true);
      size_t best = 0;
      for (size_t i = 0; i < samples.size(); ++i) best = rewards[i] > rewards[best] ? i : best;
      for (size_t i = 0; i < samples.size(); ++i) {
        if (best_of_n && i != best) continue;
        TrainSequence seq{.prompt = policy_->tokenizer->Encode("def f" + std::to_string(p)),
                          .completion = samples[i].tokens,
                          .old_logprobs = samples[i].logprobs,
                          .advantages = std::vector<float>(samples[i].tokens.size(), adv[i])};
        batch->push_back(std::move(seq));
      }
    }
    return total / count;
  }

  // Up to 60 steps of sampling and training (GRPO, or best-of-N's
  // supervised loss on each group's best) at learning rate 3e-3, until the
  // mean reward reaches 0.9; the rewards of the first and the last step.
  std::pair<double, double> TrainUntilRewarded(bool best_of_n);

  std::unique_ptr<testing::ScratchDir> dir_;
  std::unique_ptr<LoadedPolicy> policy_;
  int32_t eos_ = 0;
};

v1::OptimizerParams Optimizer(double lr) {
  v1::OptimizerParams p;
  p.set_learning_rate(lr);
  p.set_beta1(0.9);
  p.set_beta2(0.999);
  p.set_eps(1e-8);
  p.set_weight_decay(0.0);
  p.set_max_grad_norm(1.0);
  p.set_batch_size(64);
  p.set_micro_batch_size(16);
  return p;
}

std::pair<double, double> TrainerLearningTest::TrainUntilRewarded(bool best_of_n) {
  auto trainer = PolicyTrainer::Create(policy_->model.get(), nullptr,
                                       {.optimizer = Optimizer(3e-3),
                                        .schedule = {.peak = 3e-3, .total_steps = 60, .min_lr_ratio = 1.0}});
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return {0, 0};
  double first = -1, last = 0;
  for (int step = 0; step < 60 && last < 0.9; ++step) {
    std::vector<TrainSequence> batch;
    last = SampleStep(step, best_of_n, &batch);
    if (first < 0) first = last;
    auto stats = (*trainer)->Step(
        batch, {.objective = best_of_n ? Objective::kSupervised : Objective::kGrpo});
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok()) break;
  }
  return {first, last};
}

TEST_F(TrainerLearningTest, GrpoRaisesTheMeanRewardToAtLeast0_9) {
  const auto [first, last] = TrainUntilRewarded(/*best_of_n=*/false);
  EXPECT_LT(first, 0.75);
  EXPECT_GE(last, 0.9) << "started at " << first;
}

// The GPU path: bf16 weights with fp32 master copies, fused attention.
TEST_F(TrainerLearningTest, GrpoInBf16OnTheGpuRaisesTheMeanRewardToAtLeast0_9) {
  if (!DescribeTorchRuntime().cuda_available) GTEST_SKIP() << "no CUDA device in this LibTorch";
  auto gpu = LoadPolicy(dir_->Sub("model"), "cuda:0", "bfloat16");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  policy_ = *std::move(gpu);
  const auto [first, last] = TrainUntilRewarded(/*best_of_n=*/false);
  EXPECT_GE(last, 0.9) << "started at " << first;
}

TEST_F(TrainerLearningTest, BestOfNRaisesTheMeanRewardToAtLeast0_9) {
  const auto [first, last] = TrainUntilRewarded(/*best_of_n=*/true);
  EXPECT_LT(first, 0.75);
  EXPECT_GE(last, 0.9) << "started at " << first;
}

// The importance ratio is exp(learner log-prob - behaviour log-prob): on
// the weights that sampled it, it must be 1, so the learner's log-probs at
// the sampling temperature must equal the sampler's.
TEST_F(TrainerLearningTest, LearnerLogprobsEqualTheSamplersAtTheSamplingTemperature) {
  constexpr double kTemperature = 0.7;
  auto gen = Generator::Create(policy_->model.get(), policy_->tokenizer.get(),
                               {.slots = 4, .max_len = 64});
  ASSERT_TRUE(gen.ok());
  const std::vector<int32_t> prompt = policy_->tokenizer->Encode("def relu(x):");
  GroupRequest request{.group_id = "g", .prompt_tokens = prompt};
  for (int i = 0; i < 4; ++i) request.samples.push_back({.temperature = kTemperature, .seed = 7u + i});
  request.stop.max_new_tokens = 12;
  ASSERT_TRUE((*gen)->Enqueue(request).ok());
  std::vector<TrainSequence> seqs;
  while (!(*gen)->idle()) {
    auto done = (*gen)->Step();
    ASSERT_TRUE(done.ok());
    for (GeneratedSample& s : *done) {
      seqs.push_back({.prompt = prompt, .completion = s.tokens, .old_logprobs = s.logprobs});
    }
  }
  std::vector<const TrainSequence*> ptrs;
  for (const TrainSequence& s : seqs) ptrs.push_back(&s);
  auto lp = ComputeCompletionLogprobs(*policy_->model, ptrs, kTemperature);
  ASSERT_TRUE(lp.ok()) << lp.status();
  for (size_t b = 0; b < seqs.size(); ++b) {
    for (size_t j = 0; j < seqs[b].completion.size(); ++j) {
      EXPECT_NEAR(lp->logprobs[b][j].item<double>(), seqs[b].old_logprobs[j], 1e-4)
          << "sequence " << b << " token " << j;
    }
  }
}

// With recompute_old_logprobs the trainer keeps the sampler's log-probs for
// the TIS weight. Sampled on the very weights it trains (weights of 1, within
// the cap), the step's loss is the one without the correction; sampler
// log-probs made 5 nats lower (the weight capped at 2) double it. Every
// advantage is 1, so the loss without the correction is -1 (ratio 1).
TEST_F(TrainerLearningTest, TisLeavesOnPolicySamplesUnchangedAndWeightsOffPolicyOnes) {
  std::vector<TrainSequence> batch;
  SampleStep(/*step=*/0, /*best_of_n=*/false, &batch);
  ASSERT_FALSE(batch.empty());
  for (TrainSequence& seq : batch) std::fill(seq.advantages.begin(), seq.advantages.end(), 1.0f);
  const auto loss = [&](double tis_cap, float shift) {
    std::vector<TrainSequence> shifted = batch;
    for (TrainSequence& seq : shifted) {
      for (float& lp : seq.old_logprobs) lp -= shift;
    }
    // A fresh model each time: the comparison is of one step from the same weights.
    auto loaded = LoadPolicy(dir_->Sub("model"), "cpu", "float32");
    EXPECT_TRUE(loaded.ok());
    auto trainer = PolicyTrainer::Create((*loaded)->model.get(), nullptr,
                                         {.optimizer = Optimizer(1e-3)});
    EXPECT_TRUE(trainer.ok());
    auto stats = (*trainer)->Step(shifted, {.objective = Objective::kGrpo,
                                            .grpo = {.tis_cap = tis_cap},
                                            .recompute_old_logprobs = true});
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? stats->loss : 0.0;
  };
  EXPECT_NEAR(loss(0.0, 0.0f), -1.0, 1e-5);
  EXPECT_NEAR(loss(2.0, 0.0f), -1.0, 1e-3);
  EXPECT_NEAR(loss(2.0, 5.0f), -2.0, 1e-5);
}

TEST_F(TrainerLearningTest, RejectsBatchesWhosePerTokenFieldsDoNotMatch) {
  auto trainer = PolicyTrainer::Create(policy_->model.get(), nullptr, {.optimizer = Optimizer(1e-3)});
  ASSERT_TRUE(trainer.ok());
  TrainSequence bad{.prompt = {1, 2}, .completion = {3, 4}, .old_logprobs = {-1.0f}, .advantages = {1, 1}};
  auto stats = (*trainer)->Step({bad}, {.objective = Objective::kGrpo});
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(stats.status().message().find("1 log-probabilities"), std::string::npos);
  EXPECT_EQ((*trainer)->Step({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TrainerLearningTest, MicroBatchesTakeSequencesByLengthSoTheyPadLessAndTrainAsOneBatch) {
  // Short and long completions alternate, as a GRPO group's do: in batch
  // order every micro-batch of two would pad a short one to a long one.
  const std::vector<int32_t> prompt = policy_->tokenizer->Encode("def f");
  std::vector<TrainSequence> batch;
  int64_t positions = 0;
  for (int i = 0; i < 8; ++i) {
    const int length = i % 2 == 0 ? 2 : 20;
    TrainSequence seq{.prompt = prompt};
    for (int j = 0; j < length; ++j) seq.completion.push_back(3 + (i * 7 + j) % 40);
    seq.old_logprobs.assign(seq.completion.size(), -3.0f);
    seq.advantages.assign(seq.completion.size(), i % 3 == 0 ? 1.0f : -0.5f);
    positions += static_cast<int64_t>(seq.prompt.size() + seq.completion.size());
    batch.push_back(std::move(seq));
  }
  auto twin = LoadPolicy(dir_->Sub("model"), "cpu", "float32");
  ASSERT_TRUE(twin.ok()) << twin.status();
  v1::OptimizerParams whole = Optimizer(1e-2), pairs = Optimizer(1e-2);
  whole.set_micro_batch_size(8);
  pairs.set_micro_batch_size(2);
  auto one = PolicyTrainer::Create(policy_->model.get(), nullptr, {.optimizer = whole});
  auto many = PolicyTrainer::Create((*twin)->model.get(), nullptr, {.optimizer = pairs});
  ASSERT_TRUE(one.ok() && many.ok());
  auto a = (*one)->Step(batch, {.objective = Objective::kGrpo});
  auto b = (*many)->Step(batch, {.objective = Objective::kGrpo});
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(b->sequence_tokens, positions);
  EXPECT_EQ(b->padded_tokens, positions) << "pairs of equal length need no padding";
  EXPECT_EQ(a->padded_tokens, 8 * static_cast<int64_t>(prompt.size() + 20));
  EXPECT_NEAR(a->loss, b->loss, 1e-5);
  EXPECT_NEAR(a->grad_norm, b->grad_norm, 1e-4 * std::max(1.0, a->grad_norm));
  // The same gradient (what the step left in .grad, clipped alike), whatever
  // order the micro-batches summed it in.
  const auto one_params = policy_->model->NamedParameters();
  const auto many_params = (*twin)->model->NamedParameters();
  ASSERT_EQ(one_params.size(), many_params.size());
  for (size_t i = 0; i < one_params.size(); ++i) {
    const at::Tensor& g1 = one_params[i].second.grad();
    const at::Tensor& g2 = many_params[i].second.grad();
    ASSERT_EQ(g1.defined(), g2.defined()) << one_params[i].first;
    if (g1.defined()) EXPECT_TRUE(at::allclose(g1, g2, 1e-4, 1e-7)) << one_params[i].first;
  }
}

// Supervised steps on fixed sequences; returns the losses.
std::vector<double> Train(PolicyTrainer& trainer, const std::vector<TrainSequence>& batch, int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    auto stats = trainer.Step(batch, {.objective = Objective::kSupervised});
    EXPECT_TRUE(stats.ok()) << stats.status();
    losses.push_back(stats.ok() ? stats->loss : 0);
  }
  return losses;
}

TEST_F(TrainerLearningTest, ResumedFromACheckpointTheLossCurveContinuesExactly) {
  const std::vector<TrainSequence> batch = {
      {.prompt = policy_->tokenizer->Encode("class Model"),
       .completion = policy_->tokenizer->Encode("(nn.Module):\n    pass")},
      {.prompt = policy_->tokenizer->Encode("def get_inputs"),
       .completion = policy_->tokenizer->Encode("():\n    return [x]")}};
  const PolicyTrainerOptions options{.optimizer = Optimizer(1e-2),
                                     .schedule = {.peak = 1e-2, .warmup_steps = 2, .total_steps = 6}};
  // Uninterrupted: six steps.
  auto straight = LoadPolicy(dir_->Sub("model"), "cpu", "float32");
  ASSERT_TRUE(straight.ok());
  auto a = PolicyTrainer::Create((*straight)->model.get(), nullptr, options);
  ASSERT_TRUE(a.ok());
  const std::vector<double> expected = Train(**a, batch, 6);
  // Three steps, a checkpoint, everything dropped, then resumed for three.
  testing::ScratchDir job;
  std::string written;
  {
    auto first = LoadPolicy(dir_->Sub("model"), "cpu", "float32");
    ASSERT_TRUE(first.ok());
    auto b = PolicyTrainer::Create((*first)->model.get(), nullptr, options);
    ASSERT_TRUE(b.ok());
    Train(**b, batch, 3);
    v1::TrainerState state;
    state.set_step((*b)->step());
    state.set_optimizer_steps((*b)->optimizer().steps());
    v1::CheckpointSpec spec;
    spec.set_keep_last(2);
    spec.set_max_shard_bytes(40000);  // several shards, as transformers writes them
    auto dir = WriteTrainingCheckpoint({.job_dir = job.path(), .source_model_dir = dir_->Sub("model"),
                                        .spec = spec},
                                       *(*first)->model, (*b)->optimizer(), state);
    ASSERT_TRUE(dir.ok()) << dir.status();
    written = *dir;
  }
  auto latest = LatestCheckpoint(job.path());
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ(**latest, written);
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(written) / "model.safetensors.index.json"));
  auto resumed = LoadPolicy(written, "cpu", "float32");
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  auto state = ReadTrainerState(written);
  ASSERT_TRUE(state.ok());
  auto c = PolicyTrainer::Create((*resumed)->model.get(), nullptr, options);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(LoadOptimizerState(written, *state, (*c)->optimizer()).ok());
  (*c)->set_step(state->step());
  const std::vector<double> continued = Train(**c, batch, 3);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(continued[i], expected[3 + i], 1e-5) << "step " << 3 + i;
}

TEST_F(TrainerLearningTest, AWarmStartsReferenceIsSavedApartFromCheckpointsAndLoadsAsThatPolicy) {
  const std::vector<TrainSequence> batch = {
      {.prompt = policy_->tokenizer->Encode("class Model"),
       .completion = policy_->tokenizer->Encode("(nn.Module):\n    pass")}};
  const PolicyTrainerOptions options{.optimizer = Optimizer(1e-2),
                                     .schedule = {.peak = 1e-2, .total_steps = 6}};
  auto trainer = PolicyTrainer::Create(policy_->model.get(), nullptr, options);
  ASSERT_TRUE(trainer.ok());
  Train(**trainer, batch, 2);
  testing::ScratchDir job;
  EXPECT_FALSE(ReferenceModel(job.path()).has_value());
  v1::CheckpointSpec spec;
  spec.set_keep_last(1);
  spec.set_max_shard_bytes(1 << 30);
  const CheckpointTarget target{.job_dir = job.path(), .source_model_dir = dir_->Sub("model"),
                                .spec = spec};
  auto written = WriteReferenceModel(target, *policy_->model);
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(ReferenceModel(job.path()), std::optional<std::string>(*written));
  // Not a checkpoint to resume from, and not pruned by the checkpoints'
  // keep_last while the policy moves on.
  auto none = LatestCheckpoint(job.path());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  std::vector<at::Tensor> at_reference;
  for (const auto& [name, p] : policy_->model->NamedParameters()) at_reference.push_back(p.clone());
  for (int i = 0; i < 3; ++i) {
    Train(**trainer, batch, 1);
    v1::TrainerState state;
    state.set_step((*trainer)->step());
    ASSERT_TRUE(WriteTrainingCheckpoint(target, *policy_->model, (*trainer)->optimizer(), state).ok());
  }
  auto reference = LoadPolicy(*written, "cpu", "float32");
  ASSERT_TRUE(reference.ok()) << reference.status();
  const auto loaded = (*reference)->model->NamedParameters();
  const auto now = policy_->model->NamedParameters();
  ASSERT_EQ(loaded.size(), at_reference.size());
  bool moved = false;
  for (size_t i = 0; i < loaded.size(); ++i) {
    EXPECT_TRUE(at::equal(loaded[i].second, at_reference[i])) << loaded[i].first;
    moved = moved || !at::equal(now[i].second, at_reference[i]);
  }
  EXPECT_TRUE(moved) << "the policy trained on after the reference was taken";
}

}  // namespace
}  // namespace kforge
