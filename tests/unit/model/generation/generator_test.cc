// The continuous-batching generator on a `kforge tiny-model` checkpoint:
// greedy output is the argmax chain of the uncached forward pass; the
// returned log-probabilities are the model's; a sample's tokens do not
// depend on what shares its batch or on queueing; stop conditions, slot
// limits and bad requests behave as generator.h says; and the step kept in
// flight (one decode step of lookahead) changes none of it, however samples
// end, move or are admitted around it.
#include "model/generation/generator.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/checkpoint/tiny_model.h"
#include "model/sampling/token_sampler.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/transformer/checkpoint_loader.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/tiny_checkpoint.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

class GeneratorTest : public testing::TinyCheckpointSuite<Architecture::kQwen2, 5> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<DecoderModel>> model =
        LoadDecoderModel(dir_->Sub("model"), {});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer =
        BpeTokenizer::FromFile(dir_->Sub("model/tokenizer.json"));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }

  std::unique_ptr<Generator> NewGenerator(int64_t slots, int64_t max_len) {
    absl::StatusOr<std::unique_ptr<Generator>> gen =
        Generator::Create(model_.get(), tokenizer_.get(), {.slots = slots, .max_len = max_len});
    EXPECT_TRUE(gen.ok()) << gen.status();
    return gen.ok() ? *std::move(gen) : nullptr;
  }

  GroupRequest Group(const std::string& id, const std::string& prompt, int group_size,
                     double temperature, int max_new_tokens) {
    GroupRequest request{.group_id = id, .prompt_tokens = tokenizer_->Encode(prompt)};
    for (int i = 0; i < group_size; ++i) {
      request.samples.push_back({.temperature = temperature,
                                 .seed = DeriveSampleSeed(7, id + "/" + std::to_string(i))});
    }
    request.stop.max_new_tokens = max_new_tokens;
    return request;
  }

  // Runs to idle; results keyed by "group/index". `after_step` sees the
  // results so far after every Step.
  using StepHook = std::function<void(const std::map<std::string, GeneratedSample>&)>;
  static std::map<std::string, GeneratedSample> RunAll(Generator* gen,
                                                       int64_t* most_waiting = nullptr,
                                                       const StepHook& after_step = nullptr) {
    std::map<std::string, GeneratedSample> out;
    for (int steps = 0; !gen->idle() && steps < 10000; ++steps) {
      if (most_waiting != nullptr) {
        *most_waiting = std::max(*most_waiting, gen->stats().waiting_groups);
      }
      absl::StatusOr<std::vector<GeneratedSample>> done = gen->Step();
      EXPECT_TRUE(done.ok()) << done.status();
      if (!done.ok()) break;
      for (GeneratedSample& s : *done) {
        out.emplace(s.group_id + "/" + std::to_string(s.index), std::move(s));
      }
      if (after_step) after_step(out);
    }
    return out;
  }

  // Sample `index` of `request` generated on its own, in a one-slot generator.
  GeneratedSample Alone(const GroupRequest& request, int index, int64_t max_len) {
    GroupRequest one = request;
    one.samples = {request.samples[static_cast<size_t>(index)]};
    std::unique_ptr<Generator> gen = NewGenerator(1, max_len);
    EXPECT_TRUE(gen->Enqueue(std::move(one)).ok());
    return RunAll(gen.get())[request.group_id + "/0"];
  }

  // Every sample in `out` has the tokens, log-probabilities, text and finish
  // reason of the same sample generated alone.
  void ExpectEachAsAlone(const std::map<std::string, GeneratedSample>& out,
                         const std::vector<GroupRequest>& requests, int64_t max_len) {
    for (const GroupRequest& request : requests) {
      for (int i = 0; i < static_cast<int>(request.samples.size()); ++i) {
        const std::string key = request.group_id + "/" + std::to_string(i);
        ASSERT_TRUE(out.contains(key)) << key;
        const GeneratedSample& got = out.at(key);
        const GeneratedSample alone = Alone(request, i, max_len);
        EXPECT_EQ(got.tokens, alone.tokens) << key;
        EXPECT_EQ(got.text, alone.text) << key;
        EXPECT_EQ(got.finish_reason, alone.finish_reason) << key;
        ASSERT_EQ(got.logprobs.size(), alone.logprobs.size()) << key;
        for (size_t t = 0; t < got.logprobs.size(); ++t) {
          EXPECT_NEAR(got.logprobs[t], alone.logprobs[t], 1e-4) << key << " token " << t;
        }
      }
    }
  }

  // The uncached logits after `tokens`: float32 [V].
  at::Tensor NextLogits(const std::vector<int32_t>& tokens) {
    std::vector<int64_t> ids(tokens.begin(), tokens.end());
    absl::StatusOr<at::Tensor> logits = model_->Forward(at::tensor(ids, at::kLong).unsqueeze(0));
    EXPECT_TRUE(logits.ok()) << logits.status();
    return logits.ok() ? (*logits)[0][-1].to(at::kFloat) : at::Tensor();
  }

  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<BpeTokenizer> tokenizer_;
};

TEST_F(GeneratorTest, GreedyOutputIsTheArgmaxChainOfTheUncachedModel) {
  std::unique_ptr<Generator> gen = NewGenerator(4, 64);
  ASSERT_TRUE(gen->Enqueue(Group("a", "def forward(self, x):", 1, 0.0, 10)).ok());
  ASSERT_TRUE(gen->Enqueue(Group("b", "import torch", 1, 0.0, 10)).ok());
  std::map<std::string, GeneratedSample> out = RunAll(gen.get());
  ASSERT_EQ(out.size(), 2u);
  for (const auto& [prompt, key] : {std::pair<std::string, std::string>{"def forward(self, x):", "a/0"},
                                    {"import torch", "b/0"}}) {
    std::vector<int32_t> tokens = tokenizer_->Encode(prompt);
    std::vector<int32_t> expected;
    for (int i = 0; i < 10; ++i) {
      const int32_t next = static_cast<int32_t>(NextLogits(tokens).argmax().item<int64_t>());
      expected.push_back(next);
      tokens.push_back(next);
    }
    EXPECT_EQ(out[key].tokens, expected) << key;
    EXPECT_EQ(out[key].finish_reason, FinishReason::kMaxTokens);
  }
}

TEST_F(GeneratorTest, LogProbabilitiesAreTheModelsAtTheSampledTokens) {
  std::unique_ptr<Generator> gen = NewGenerator(4, 64);
  ASSERT_TRUE(gen->Enqueue(Group("g", "x = torch.relu(x)", 3, 1.0, 8)).ok());
  std::map<std::string, GeneratedSample> out = RunAll(gen.get());
  ASSERT_EQ(out.size(), 3u);
  for (const auto& [key, sample] : out) {
    std::vector<int32_t> tokens = tokenizer_->Encode("x = torch.relu(x)");
    ASSERT_EQ(sample.tokens.size(), 8u);
    ASSERT_EQ(sample.logprobs.size(), 8u);
    for (size_t i = 0; i < sample.tokens.size(); ++i) {
      const double expected =
          at::log_softmax(NextLogits(tokens), 0)[sample.tokens[i]].item<double>();
      EXPECT_NEAR(sample.logprobs[i], expected, 1e-4) << key << " token " << i;
      tokens.push_back(sample.tokens[i]);
    }
  }
}

TEST_F(GeneratorTest, EachTokenIsTheSamplersDrawAtItsIndexFromTheUncachedLogits) {
  // Token i of a sample is TokenSampler's draw with step i from the logits
  // after the prompt and tokens 0..i-1: whichever step, prefill or lookahead
  // decode, drew it.
  std::unique_ptr<Generator> gen = NewGenerator(4, 64);
  const GroupRequest request = Group("g", "def relu(x):", 3, 1.0, 8);
  ASSERT_TRUE(gen->Enqueue(request).ok());
  std::map<std::string, GeneratedSample> out = RunAll(gen.get());
  ASSERT_EQ(out.size(), 3u);
  const TokenSampler sampler;
  for (int index = 0; index < 3; ++index) {
    const GeneratedSample& sample = out["g/" + std::to_string(index)];
    ASSERT_EQ(sample.tokens.size(), 8u);
    std::vector<int32_t> tokens = request.prompt_tokens;
    for (size_t i = 0; i < sample.tokens.size(); ++i) {
      const RowSamplingParams params = request.samples[static_cast<size_t>(index)];
      const uint64_t step = i;
      absl::StatusOr<SampledTokens> drawn =
          sampler.Sample(NextLogits(tokens).unsqueeze(0), {&params, 1}, {&step, 1});
      ASSERT_TRUE(drawn.ok()) << drawn.status();
      EXPECT_EQ(sample.tokens[i], drawn->token_ids[0].item<int64_t>()) << index << " token " << i;
      tokens.push_back(sample.tokens[i]);
    }
  }
}

TEST_F(GeneratorTest, SamplesDoNotDependOnBatchingOrQueueing) {
  auto enqueue_all = [&](Generator* gen) {
    ASSERT_TRUE(gen->Enqueue(Group("p", "def relu(x):", 4, 1.0, 12)).ok());
    ASSERT_TRUE(gen->Enqueue(Group("q", "return x * 2", 3, 0.7, 9)).ok());
    ASSERT_TRUE(gen->Enqueue(Group("r", "import triton", 4, 1.3, 15)).ok());
  };
  std::unique_ptr<Generator> wide = NewGenerator(16, 64);
  enqueue_all(wide.get());
  int64_t wide_waiting = 0;
  std::map<std::string, GeneratedSample> together = RunAll(wide.get(), &wide_waiting);
  // Four slots: the groups take turns, and later ones join as earlier finish.
  std::unique_ptr<Generator> narrow = NewGenerator(4, 64);
  enqueue_all(narrow.get());
  int64_t narrow_waiting = 0;
  std::map<std::string, GeneratedSample> queued = RunAll(narrow.get(), &narrow_waiting);

  EXPECT_GT(narrow_waiting, 0) << "the narrow generator never queued a group";
  ASSERT_EQ(together.size(), 11u);
  ASSERT_EQ(queued.size(), 11u);
  for (const auto& [key, sample] : together) {
    EXPECT_EQ(queued[key].tokens, sample.tokens) << key;
    ASSERT_EQ(queued[key].logprobs.size(), sample.logprobs.size()) << key;
    for (size_t i = 0; i < sample.logprobs.size(); ++i) {
      EXPECT_NEAR(queued[key].logprobs[i], sample.logprobs[i], 1e-4) << key;
    }
  }
  // Different seeds in one group give different completions.
  EXPECT_NE(together["p/0"].tokens, together["p/1"].tokens);
  EXPECT_EQ(narrow->stats().running_sequences, 0);
  EXPECT_EQ(narrow->stats().cached_tokens, 0);
  EXPECT_EQ(narrow->stats().finished_samples, 11u);
  // Group q finishes first: sequences above its slots moved down into them.
  EXPECT_GT(wide->stats().slot_moves, 0u);
}

TEST_F(GeneratorTest, EosEndsASampleAndIsKeptAsItsLastToken) {
  std::unique_ptr<Generator> probe = NewGenerator(1, 64);
  ASSERT_TRUE(probe->Enqueue(Group("g", "def f(x):", 1, 0.0, 6)).ok());
  const std::vector<int32_t> greedy = RunAll(probe.get())["g/0"].tokens;
  ASSERT_EQ(greedy.size(), 6u);

  std::unique_ptr<Generator> gen = NewGenerator(1, 64);
  GroupRequest request = Group("g", "def f(x):", 1, 0.0, 6);
  request.stop.eos_token_ids = {greedy[3]};
  ASSERT_TRUE(gen->Enqueue(request).ok());
  GeneratedSample sample = RunAll(gen.get())["g/0"];
  EXPECT_EQ(sample.finish_reason, FinishReason::kEos);
  // The first occurrence of that token ends it.
  const auto first = std::find(greedy.begin(), greedy.end(), greedy[3]);
  EXPECT_EQ(sample.tokens, std::vector<int32_t>(greedy.begin(), first + 1));
}

TEST_F(GeneratorTest, StopStringCutsTheTextButKeepsTheTokens) {
  std::unique_ptr<Generator> probe = NewGenerator(1, 64);
  ASSERT_TRUE(probe->Enqueue(Group("g", "class ModelNew", 1, 0.0, 8)).ok());
  GeneratedSample full = RunAll(probe.get())["g/0"];
  ASSERT_GE(full.text.size(), 4u);
  const std::string stop = full.text.substr(full.text.size() / 2, 2);
  const std::string expected_text = full.text.substr(0, full.text.find(stop));

  std::unique_ptr<Generator> gen = NewGenerator(1, 64);
  GroupRequest request = Group("g", "class ModelNew", 1, 0.0, 8);
  request.stop.stop_strings = {stop};
  ASSERT_TRUE(gen->Enqueue(request).ok());
  GeneratedSample sample = RunAll(gen.get())["g/0"];
  EXPECT_EQ(sample.finish_reason, FinishReason::kStopString);
  EXPECT_EQ(sample.text, expected_text);
  EXPECT_EQ(sample.tokens,
            std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + sample.tokens.size()));
}

TEST_F(GeneratorTest, CompletionIsCappedByWhatTheSlotHolds) {
  const std::vector<int32_t> prompt = tokenizer_->Encode("def f(x):");
  std::unique_ptr<Generator> gen = NewGenerator(2, static_cast<int64_t>(prompt.size()) + 5);
  ASSERT_TRUE(gen->Enqueue(Group("g", "def f(x):", 2, 1.0, 1000)).ok());
  std::map<std::string, GeneratedSample> out = RunAll(gen.get());
  ASSERT_EQ(out.size(), 2u);
  for (const auto& [key, sample] : out) {
    EXPECT_EQ(sample.tokens.size(), 5u) << key;
    EXPECT_EQ(sample.finish_reason, FinishReason::kMaxTokens) << key;
  }
}

TEST_F(GeneratorTest, BadRequestsAreRejectedByNameAndTheGeneratorCarriesOn) {
  std::unique_ptr<Generator> gen = NewGenerator(2, 16);
  absl::Status too_big = gen->Enqueue(Group("big", "x", 3, 1.0, 4));
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.message(), HasSubstr("group big"));
  EXPECT_THAT(too_big.message(), HasSubstr("2 slots"));

  GroupRequest empty = Group("empty", "", 1, 1.0, 4);
  EXPECT_THAT(gen->Enqueue(empty).message(), HasSubstr("empty prompt"));

  GroupRequest long_prompt = Group("long", "x", 1, 1.0, 4);
  long_prompt.prompt_tokens.assign(16, long_prompt.prompt_tokens[0]);
  EXPECT_THAT(gen->Enqueue(long_prompt).message(), HasSubstr("leaves no room"));

  GroupRequest bad_params = Group("hot", "x", 1, 1.0, 4);
  bad_params.samples[0].top_p = 1.5;
  EXPECT_THAT(gen->Enqueue(bad_params).message(), HasSubstr("top_p"));

  GroupRequest empty_stop = Group("stop", "x", 1, 1.0, 4);
  empty_stop.stop.stop_strings = {""};
  EXPECT_FALSE(gen->Enqueue(empty_stop).ok());

  EXPECT_TRUE(gen->idle());
  ASSERT_TRUE(gen->Enqueue(Group("ok", "x = 1", 2, 1.0, 3)).ok());
  EXPECT_EQ(RunAll(gen.get()).size(), 2u);
}

TEST_F(GeneratorTest, AbandonDropsEveryGroupOnceAndFreesTheCache) {
  std::unique_ptr<Generator> gen = NewGenerator(2, 64);
  ASSERT_TRUE(gen->Enqueue(Group("run", "def f(x):", 2, 1.0, 50)).ok());
  ASSERT_TRUE(gen->Enqueue(Group("wait", "def g(x):", 2, 1.0, 50)).ok());
  ASSERT_TRUE(gen->Step().ok());
  EXPECT_EQ(gen->stats().running_sequences, 2);
  EXPECT_EQ(gen->stats().waiting_groups, 1);
  EXPECT_THAT(gen->Abandon(), ::testing::ElementsAre("run", "wait"));
  EXPECT_TRUE(gen->idle());
  EXPECT_EQ(gen->stats().cached_tokens, 0);
  ASSERT_TRUE(gen->Enqueue(Group("again", "def h(x):", 2, 1.0, 3)).ok());
  EXPECT_EQ(RunAll(gen.get()).size(), 2u);
}

TEST_F(GeneratorTest, SamplesEndingAtDifferentStepsMatchTheSameSamplesGeneratedAlone) {
  // What group a says with no stop condition but its length.
  std::unique_ptr<Generator> probe = NewGenerator(4, 64);
  ASSERT_TRUE(probe->Enqueue(Group("a", "def relu(x):", 4, 1.0, 16)).ok());
  std::map<std::string, GeneratedSample> unstopped = RunAll(probe.get());
  ASSERT_EQ(unstopped.size(), 4u);
  // EOS: sample 0's third token. Stop string: a token of sample 3 of at
  // least two bytes, from its fifth token on.
  GroupRequest a = Group("a", "def relu(x):", 4, 1.0, 16);
  a.stop.eos_token_ids = {unstopped["a/0"].tokens[2]};
  const std::vector<int32_t>& third = unstopped["a/3"].tokens;
  for (size_t t = 4; t < third.size() && a.stop.stop_strings.empty(); ++t) {
    const std::string bytes(tokenizer_->RawBytes(third[t]));
    const bool printable = std::all_of(bytes.begin(), bytes.end(),
                                       [](char c) { return c > ' ' && c < 127; });
    if (bytes.size() >= 2 && printable) a.stop.stop_strings = {bytes};
  }
  ASSERT_FALSE(a.stop.stop_strings.empty()) << "sample a/3 has no token to stop at";
  // b waits for two of a's four slots.
  const GroupRequest b = Group("b", "import triton", 2, 0.8, 10);

  std::unique_ptr<Generator> gen = NewGenerator(4, 64);
  ASSERT_TRUE(gen->Enqueue(a).ok());
  ASSERT_TRUE(gen->Enqueue(b).ok());
  int a_left_when_b_admitted = -1;
  std::map<std::string, GeneratedSample> out =
      RunAll(gen.get(), nullptr, [&](const std::map<std::string, GeneratedSample>& so_far) {
        if (a_left_when_b_admitted < 0 && gen->stats().waiting_groups == 0) {
          a_left_when_b_admitted = 4 - static_cast<int>(std::count_if(
                                           so_far.begin(), so_far.end(),
                                           [](const auto& kv) { return kv.first[0] == 'a'; }));
        }
      });

  ASSERT_EQ(out.size(), 6u);
  std::set<FinishReason> reasons;
  std::set<size_t> lengths;
  uint64_t tokens = 0;
  for (const auto& [key, sample] : out) {
    if (key[0] == 'a') reasons.insert(sample.finish_reason);
    if (key[0] == 'a') lengths.insert(sample.tokens.size());
    tokens += sample.tokens.size();
  }
  EXPECT_EQ(reasons, (std::set<FinishReason>{FinishReason::kEos, FinishReason::kStopString,
                                             FinishReason::kMaxTokens}));
  EXPECT_GE(lengths.size(), 3u) << "group a's samples should end at different steps";
  EXPECT_GT(a_left_when_b_admitted, 0) << "b should join while a is still running";
  EXPECT_GT(gen->stats().slot_moves, 0u);
  // Draws made for samples already ended by EOS or a stop string are discarded.
  EXPECT_EQ(gen->stats().generated_tokens, tokens);
  EXPECT_EQ(gen->stats().cached_tokens, 0);
  ExpectEachAsAlone(out, {a, b}, 64);
}

TEST_F(GeneratorTest, SequencesMovedWhileTheirTokenIsPendingKeepTheirSamples) {
  // Four slots: "short" ends first and "long", in the slots above it, moves
  // down into its slots while its next token is still being drawn; "late"
  // takes the slots freed after that.
  const std::vector<GroupRequest> requests = {Group("short", "x = 1", 2, 1.0, 3),
                                              Group("long", "def f(x):", 2, 1.0, 14),
                                              Group("late", "import torch", 2, 1.2, 6)};
  std::unique_ptr<Generator> gen = NewGenerator(4, 64);
  for (const GroupRequest& request : requests) ASSERT_TRUE(gen->Enqueue(request).ok());
  std::map<std::string, GeneratedSample> out = RunAll(gen.get());
  ASSERT_EQ(out.size(), 6u);
  EXPECT_GE(gen->stats().slot_moves, 2u);
  ExpectEachAsAlone(out, requests, 64);
}

TEST_F(GeneratorTest, DecodeStepsAreNotSpentOnSamplesAtTheirLimit) {
  std::unique_ptr<Generator> gen = NewGenerator(4, 64);
  ASSERT_TRUE(gen->Enqueue(Group("g", "def f(x):", 3, 1.0, 10)).ok());
  int calls = 0;
  std::map<std::string, GeneratedSample> out =
      RunAll(gen.get(), nullptr, [&](const auto&) { ++calls; });
  ASSERT_EQ(out.size(), 3u);
  // The first token comes from the prefill, the other nine from nine steps;
  // each call returns the tokens of the step the call before queued.
  EXPECT_EQ(gen->stats().decode_steps, 9u);
  EXPECT_EQ(gen->stats().generated_tokens, 30u);
  EXPECT_EQ(calls, 10);
}

TEST_F(GeneratorTest, WaitingForTheDeviceBetweenStepsChangesNoSample) {
  const std::vector<GroupRequest> requests = {Group("p", "def relu(x):", 3, 1.0, 12),
                                              Group("q", "return x * 2", 2, 0.7, 9)};
  std::unique_ptr<Generator> plain = NewGenerator(4, 64);
  std::unique_ptr<Generator> waited = NewGenerator(4, 64);
  EXPECT_TRUE(waited->WaitForDevice().ok());  // nothing in flight
  for (const GroupRequest& request : requests) {
    ASSERT_TRUE(plain->Enqueue(request).ok());
    ASSERT_TRUE(waited->Enqueue(request).ok());
  }
  const std::map<std::string, GeneratedSample> expected = RunAll(plain.get());
  const std::map<std::string, GeneratedSample> got = RunAll(
      waited.get(), nullptr, [&](const auto&) { EXPECT_TRUE(waited->WaitForDevice().ok()); });
  ASSERT_EQ(got.size(), 5u);
  for (const auto& [key, sample] : expected) EXPECT_EQ(got.at(key).tokens, sample.tokens) << key;
}

TEST_F(GeneratorTest, AbandonWithAStepInFlightLeavesTheGeneratorIdleAndReusable) {
  std::unique_ptr<Generator> gen = NewGenerator(4, 64);
  ASSERT_TRUE(gen->Enqueue(Group("run", "def f(x):", 3, 1.0, 20)).ok());
  // The second call queues a step and takes in the first one's tokens.
  ASSERT_TRUE(gen->Step().ok());
  ASSERT_TRUE(gen->Step().ok());
  EXPECT_EQ(gen->stats().decode_steps, 2u);
  EXPECT_THAT(gen->Abandon(), ::testing::ElementsAre("run"));
  EXPECT_TRUE(gen->idle());
  EXPECT_EQ(gen->stats().running_sequences, 0);
  EXPECT_EQ(gen->stats().cached_tokens, 0);
  EXPECT_TRUE(gen->WaitForDevice().ok());

  // Reused: the same as a generator that never held anything.
  const GroupRequest again = Group("again", "import torch", 4, 1.0, 8);
  ASSERT_TRUE(gen->Enqueue(again).ok());
  std::map<std::string, GeneratedSample> out = RunAll(gen.get());
  std::unique_ptr<Generator> fresh = NewGenerator(4, 64);
  ASSERT_TRUE(fresh->Enqueue(again).ok());
  std::map<std::string, GeneratedSample> expected = RunAll(fresh.get());
  ASSERT_EQ(out.size(), 4u);
  for (const auto& [key, sample] : expected) EXPECT_EQ(out[key].tokens, sample.tokens) << key;
  EXPECT_EQ(gen->stats().cached_tokens, 0);
}

}  // namespace
}  // namespace kforge
