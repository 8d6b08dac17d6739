#include "learner/training/step_batches.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/config/proto_defaults.h"
#include "prompts/task_prompt.h"
#include "prompts/turn_feedback.h"
#include "learner/rewards/completion_format.h"
#include "learner/rewards/turn_credit.h"
#include "prompts/trajectory_end.h"
#include "learner/training/policy_loss.h"
#include "model/sampling/sampling_params.h"
#include "model/tokenizer/bpe_tokenizer.h"

namespace kforge {
namespace {

bool StagePassed(const v1::Verdict& verdict, v1::Stage stage) {
  for (const v1::StageResult& result : verdict.stages()) {
    if (result.stage() == stage) return result.outcome() == v1::OUTCOME_PASSED;
  }
  return false;
}

// Per-token advantages: one value, or (hierarchical) the reasoning
// advantage for tokens that start inside the reasoning range and the code
// advantage for the rest. Token byte offsets come from the tokenizer's raw
// bytes, which is what the completion text was decoded from.
std::vector<float> TokenAdvantages(const v1::Sample& sample, double reasoning_adv,
                                   double code_adv, bool hierarchical,
                                   const BpeTokenizer& tokenizer) {
  const size_t n = static_cast<size_t>(sample.completion_tokens_size());
  std::vector<float> out(n, static_cast<float>(code_adv));
  if (!hierarchical) return out;
  const CompletionFormat format = AnalyzeCompletionFormat(sample.completion_text(), true);
  size_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool reasoning = offset >= format.reasoning_begin && offset < format.reasoning_end;
    out[i] = static_cast<float>(reasoning ? reasoning_adv : code_adv);
    offset += tokenizer.RawBytes(sample.completion_tokens(static_cast<int>(i))).size();
  }
  return out;
}

TrainSequence FromSample(const v1::Sample& sample) {
  TrainSequence seq;
  seq.prompt.assign(sample.prompt_tokens().begin(), sample.prompt_tokens().end());
  seq.completion.assign(sample.completion_tokens().begin(), sample.completion_tokens().end());
  seq.old_logprobs.assign(sample.completion_logprobs().begin(), sample.completion_logprobs().end());
  return seq;
}

// A multi-turn group's trajectories: per index in the group, the positions
// of its turns in group.samples, in turn order, up to (not including) the
// first unusable one (a verifier fault ends a trajectory, and has no reward
// to credit); those are counted in `unusable`.
std::vector<std::vector<size_t>> UsableTrajectories(const ScoredGroup& group, int64_t* unusable) {
  std::map<int32_t, std::map<int32_t, size_t>> by_index;  // index -> turn -> position
  for (size_t i = 0; i < group.samples.size(); ++i) {
    const v1::SampleKey& key = group.samples[i].sample().key();
    by_index[key.index_in_group()][key.turn()] = i;
  }
  std::vector<std::vector<size_t>> trajectories;
  for (const auto& [index, turns] : by_index) {
    std::vector<size_t> usable;
    for (const auto& [turn, position] : turns) {
      if (!group.rewards[position].usable) {
        ++*unusable;
        break;
      }
      usable.push_back(position);
    }
    if (!usable.empty()) trajectories.push_back(std::move(usable));
  }
  return trajectories;
}

TurnCreditOptions CreditOptions(const v1::MultiTurnSpec& spec) {
  return {.gamma = spec.gamma(),
          .baseline = spec.baseline() == v1::MultiTurnSpec::BASELINE_GROUP_MEAN
                          ? TurnBaseline::kGroupMean
                          : TurnBaseline::kLeaveOneOut};
}

// One sequence per turn of a multi-turn group, each turn's tokens with its
// turn-level advantage (TurnAdvantages: discounted returns against the
// job's per-turn baseline), over each turn's own prompt (the follow-up with
// the feedback) and behaviour log-probs. Total rewards only (hierarchical
// rewards and scale_by_std are single-turn). A turn without tokens is
// credited, and passes its credit to earlier turns, but is not trained on.
void AppendTurnSequences(const ScoredGroup& group, bool skip_zero_variance,
                         const BpeTokenizer& tokenizer, GroupSelection* selection,
                         std::vector<TrainSequence>* batch) {
  const std::vector<std::vector<size_t>> trajectories =
      UsableTrajectories(group, &selection->unusable_samples);
  std::vector<std::vector<double>> rewards;
  for (const std::vector<size_t>& turns : trajectories) {
    std::vector<double>& r = rewards.emplace_back();
    for (size_t position : turns) r.push_back(group.rewards[position].total);
  }
  absl::StatusOr<std::vector<std::vector<double>>> advantages =
      TurnAdvantages(rewards, CreditOptions(group.item.multi_turn()));
  bool signal = false;
  if (advantages.ok()) {
    for (size_t i = 0; i < trajectories.size(); ++i) {
      for (size_t t = 0; t < trajectories[i].size(); ++t) {
        const v1::Sample& sample = group.samples[trajectories[i][t]].sample();
        signal = signal || (sample.completion_tokens_size() > 0 && (*advantages)[i][t] != 0);
      }
    }
  }
  // Not ok: a reward that is not finite (the reward spec's terms are
  // bounded, so only a broken verdict gets here); the group teaches nothing.
  if (trajectories.empty() || !advantages.ok() || (!signal && skip_zero_variance)) {
    ++selection->skipped_groups;
    return;
  }
  for (size_t i = 0; i < trajectories.size(); ++i) {
    for (size_t t = 0; t < trajectories[i].size(); ++t) {
      const v1::Sample& sample = group.samples[trajectories[i][t]].sample();
      if (sample.completion_tokens_size() == 0) continue;
      TrainSequence seq = FromSample(sample);
      seq.advantages = TokenAdvantages(sample, 0, (*advantages)[i][t], false, tokenizer);
      batch->push_back(std::move(seq));
    }
  }
}

// JobProgress.solved_by_turn, reward_by_turn and turns_per_trajectory over
// the step's multi-turn groups, and each trajectory's turn count for the
// metrics.
void SummariseTurns(const std::vector<ScoredGroup>& groups, v1::JobProgress* progress,
                    LearnerMetrics::StepFigures* figures) {
  progress->clear_solved_by_turn();
  progress->clear_reward_by_turn();
  progress->set_turns_per_trajectory(0);
  int32_t max_turns = 0;
  for (const ScoredGroup& group : groups) {
    max_turns = std::max(max_turns, group.item.multi_turn().max_turns());
  }
  if (max_turns <= 1) return;
  const size_t turns = static_cast<size_t>(max_turns);
  std::vector<double> solved(turns, 0), reward(turns, 0), rewarded(turns, 0);
  double trajectories = 0, turns_taken = 0;
  for (const ScoredGroup& group : groups) {
    if (!IsMultiTurn(group.item.multi_turn())) continue;
    // By index: the first solved turn (max_turns when none was), and the
    // turns taken.
    std::map<int32_t, std::pair<int32_t, int32_t>> by_index;
    for (size_t i = 0; i < group.samples.size(); ++i) {
      const v1::SampleKey& key = group.samples[i].sample().key();
      auto [it, fresh] = by_index.emplace(key.index_in_group(), std::make_pair(max_turns, 0));
      it->second.second = std::max(it->second.second, key.turn() + 1);
      const RewardBreakdown& r = group.rewards[i];
      if (r.usable && key.turn() >= 0 && key.turn() < max_turns) {
        reward[static_cast<size_t>(key.turn())] += r.total;
        rewarded[static_cast<size_t>(key.turn())] += 1;
      }
      const bool correct = group.samples[i].verdict().correct() && r.usable && !r.hacked;
      if (correct) it->second.first = std::min(it->second.first, key.turn());
    }
    for (const auto& [index, trajectory] : by_index) {
      trajectories += 1;
      turns_taken += trajectory.second;
      figures->trajectory_turns.push_back(trajectory.second);
      for (int32_t k = trajectory.first; k < max_turns; ++k) solved[static_cast<size_t>(k)] += 1;
    }
  }
  for (size_t k = 0; k < turns; ++k) {
    progress->add_solved_by_turn(solved[k] / std::max(1.0, trajectories));
    progress->add_reward_by_turn(rewarded[k] > 0 ? reward[k] / rewarded[k] : 0);
  }
  progress->set_turns_per_trajectory(turns_taken / std::max(1.0, trajectories));
}

}  // namespace

std::vector<ScoredGroup> ScoreGroups(std::vector<CompletedGroup> completed,
                                     const v1::JobSpec& spec) {
  std::vector<ScoredGroup> groups;
  for (CompletedGroup& done : completed) {
    ScoredGroup group{std::move(done.item), std::move(done.samples), {}};
    for (const v1::ScoredSample& s : group.samples) {
      group.rewards.push_back(ComputeReward(spec.reward(), s.verdict(),
                                            s.sample().completion_text(),
                                            group.item.task().reference_solution(),
                                            spec.prompt().reasoning_tags()));
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

std::string ReferenceAnswer(const std::string& solution, bool reasoning_tags) {
  std::string code = solution;
  if (!code.empty() && code.back() != '\n') code.push_back('\n');
  const std::string block = absl::StrCat("```python\n", code, "```");
  if (!reasoning_tags) return block;
  return absl::StrCat("<think>\nCompute the same result as the reference with a kernel of "
                      "my own.\n</think>\n<answer>\n",
                      block, "\n</answer>");
}

namespace {

// Which sequences are revisions, and of which kind: uniform draws fixed by
// the sequence's place in the cycle (SamplingUniform, the sampler's own
// counter-based draw), so a resumed job draws the same ones, and unlike a
// stride they do not fall into step with the number of tasks.
constexpr uint64_t kRevisionDraw = 0;
constexpr uint64_t kWrongKindDraw = 1;

// The earlier turn of revision sequence `at` (see SupervisedSequences): a
// wrong answer in the format the prompt asks for, and the feedback the
// rollout worker would show for the verdict such an answer gets, rendered
// by the same function. The verdict's message is left empty: the real one
// names shapes and errors this function cannot know, and the feedback's
// opening sentence (the stage and the outcome) is what a revision reads first.
PastTurn WrongEarlierTurn(const std::vector<const v1::Task*>& solved, int64_t at,
                          bool reasoning_tags, int32_t feedback_max_chars) {
  const int64_t n = static_cast<int64_t>(solved.size());
  const std::string& own = solved[static_cast<size_t>(at % n)]->reference_solution();
  v1::Verdict verdict;
  const auto add_stage = [&verdict](v1::Stage stage, v1::StageOutcome outcome) {
    v1::StageResult* result = verdict.add_stages();
    result->set_stage(stage);
    result->set_outcome(outcome);
  };
  const double kind = SamplingUniform(kWrongKindDraw, static_cast<uint64_t>(at));
  // The first half of the solution's lines; all of it when it has one line.
  const size_t lines = static_cast<size_t>(std::count(own.begin(), own.end(), '\n'));
  size_t cut = 0;
  for (size_t seen = 0; cut < own.size() && seen < std::max<size_t>(1, lines / 2); ++cut) {
    if (own[cut] == '\n') ++seen;
  }
  const bool can_cut = cut < own.size();
  std::string completion;
  if (kind < 1.0 / 3 || (!can_cut && (n == 1 || kind >= 2.0 / 3))) {
    // No code at all, the commonest failure of an early policy: reasoning
    // and nothing after it (an answer cut off inside <think> reads alike).
    if (reasoning_tags) completion = "<think>\nCompute the same result as the reference.\n</think>\n";
    add_stage(v1::STAGE_STATIC, v1::OUTCOME_FAILED);
  } else if (n > 1 && kind < 2.0 / 3) {
    // Another task's kernel: it builds, and computes the wrong thing.
    completion = ReferenceAnswer(solved[static_cast<size_t>((at + 1) % n)]->reference_solution(),
                                 reasoning_tags);
    add_stage(v1::STAGE_STATIC, v1::OUTCOME_PASSED);
    add_stage(v1::STAGE_COMPILE, v1::OUTCOME_PASSED);
    add_stage(v1::STAGE_TINY_RUN, v1::OUTCOME_FAILED);
  } else {
    // This task's solution cut off halfway through its lines: an unfinished
    // module, what an answer cut off at max_new_tokens looks like. Its
    // feedback is the static check's, where such a module usually fails
    // (unparsable, or no ModelNew yet).
    completion = ReferenceAnswer(own.substr(0, cut), reasoning_tags);
    add_stage(v1::STAGE_STATIC, v1::OUTCOME_FAILED);
  }
  return {.completion = std::move(completion),
          .feedback = RenderTurnFeedback(verdict, static_cast<size_t>(feedback_max_chars))};
}

}  // namespace

absl::StatusOr<std::vector<TrainSequence>> SupervisedSequences(
    const std::vector<v1::Task>& tasks, const v1::PromptTemplate& raw_prompt,
    const BpeTokenizer& tokenizer, int32_t eos, int64_t offset, int64_t count,
    double follow_up_share, int32_t feedback_max_chars) {
  // The answer's format must be the one the rendered prompt asks for, which
  // RenderTaskPrompt decides from the template with its defaults.
  v1::PromptTemplate prompt = raw_prompt;
  if (absl::Status s = ApplyProtoDefaults(&prompt); !s.ok()) return s;
  std::vector<const v1::Task*> solved;
  for (const v1::Task& task : tasks) {
    if (!task.reference_solution().empty()) solved.push_back(&task);
  }
  if (solved.empty()) {
    return absl::FailedPreconditionError(
        "supervised steps need reference solutions, and no task of the set has one");
  }
  const int64_t n = static_cast<int64_t>(solved.size());
  std::vector<TrainSequence> batch;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t at = offset + i;
    const v1::Task& task = *solved[static_cast<size_t>(at % n)];
    const bool follow_up =
        follow_up_share > 0 &&
        SamplingUniform(kRevisionDraw, static_cast<uint64_t>(at)) < follow_up_share;
    absl::StatusOr<std::string> text =
        follow_up ? RenderFollowUpPrompt(prompt, task,
                                         {WrongEarlierTurn(solved, at, prompt.reasoning_tags(),
                                                           feedback_max_chars)})
                  : RenderTaskPrompt(prompt, task);
    if (!text.ok()) return text.status();
    TrainSequence seq;
    seq.prompt = tokenizer.Encode(*text);
    seq.completion = tokenizer.Encode(ReferenceAnswer(task.reference_solution(), prompt.reasoning_tags()));
    seq.completion.push_back(eos);
    batch.push_back(std::move(seq));
  }
  return batch;
}

std::vector<TrainSequence> GrpoSequences(const std::vector<ScoredGroup>& groups,
                                         const v1::GrpoParams& grpo, bool hierarchical,
                                         const BpeTokenizer& tokenizer, GroupSelection* selection) {
  std::vector<TrainSequence> batch;
  for (const ScoredGroup& group : groups) {
    if (IsMultiTurn(group.item.multi_turn())) {
      AppendTurnSequences(group, grpo.skip_zero_variance_groups(), tokenizer, selection, &batch);
      continue;
    }
    std::vector<size_t> usable;
    std::vector<double> total, reasoning, code;
    for (size_t i = 0; i < group.samples.size(); ++i) {
      const RewardBreakdown& r = group.rewards[i];
      if (!r.usable || group.samples[i].sample().completion_tokens_size() == 0) {
        ++selection->unusable_samples;
        continue;
      }
      usable.push_back(i);
      total.push_back(r.total);
      reasoning.push_back(r.reasoning);
      code.push_back(r.code);
    }
    const std::vector<double> adv_total = GroupAdvantages(total, grpo.scale_by_std());
    const std::vector<double> adv_reasoning = GroupAdvantages(reasoning, grpo.scale_by_std());
    const std::vector<double> adv_code = GroupAdvantages(code, grpo.scale_by_std());
    const auto nonzero = [](const std::vector<double>& a) {
      return std::any_of(a.begin(), a.end(), [](double x) { return x != 0; });
    };
    const bool signal = hierarchical ? nonzero(adv_reasoning) || nonzero(adv_code) : nonzero(adv_total);
    if (usable.empty() || (!signal && grpo.skip_zero_variance_groups())) {
      ++selection->skipped_groups;
      continue;
    }
    for (size_t k = 0; k < usable.size(); ++k) {
      const v1::Sample& sample = group.samples[usable[k]].sample();
      TrainSequence seq = FromSample(sample);
      seq.advantages = hierarchical
                           ? TokenAdvantages(sample, adv_reasoning[k], adv_code[k], true, tokenizer)
                           : TokenAdvantages(sample, 0, adv_total[k], false, tokenizer);
      batch.push_back(std::move(seq));
    }
  }
  return batch;
}

std::vector<TrainSequence> BestOfNSequences(const std::vector<ScoredGroup>& groups,
                                            const v1::BestOfNParams& params,
                                            GroupSelection* selection) {
  std::vector<TrainSequence> batch;
  for (const ScoredGroup& group : groups) {
    // The candidates: every sample, or (multi-turn) each trajectory's best
    // turn.
    std::vector<size_t> candidates;
    if (IsMultiTurn(group.item.multi_turn())) {
      for (const std::vector<size_t>& turns :
           UsableTrajectories(group, &selection->unusable_samples)) {
        std::vector<double> rewards;
        for (size_t position : turns) rewards.push_back(group.rewards[position].total);
        candidates.push_back(turns[static_cast<size_t>(BestTurn(rewards))]);
      }
    } else {
      for (size_t i = 0; i < group.samples.size(); ++i) candidates.push_back(i);
    }
    std::vector<size_t> order;
    for (size_t i : candidates) {
      if (!group.rewards[i].usable) {
        ++selection->unusable_samples;
        continue;
      }
      if (group.rewards[i].total > params.reward_threshold() &&
          group.samples[i].sample().completion_tokens_size() > 0) {
        order.push_back(i);
      }
    }
    // Stable: among equal rewards the lower index wins, so runs repeat.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return group.rewards[a].total > group.rewards[b].total;
    });
    if (order.empty()) ++selection->skipped_groups;
    for (size_t k = 0; k < order.size() && k < static_cast<size_t>(params.top_k()); ++k) {
      batch.push_back(FromSample(group.samples[order[k]].sample()));
    }
  }
  return batch;
}

void SummariseStep(const std::vector<ScoredGroup>& groups, int64_t policy_version,
                   v1::JobProgress* progress, LearnerMetrics::StepFigures* figures) {
  double reward = 0, counted = 0, speedup_sum = 0;
  double passed[5] = {0, 0, 0, 0, 0};
  std::map<int32_t, std::pair<double, double>> by_level;  // correct, samples
  const v1::Stage stages[] = {v1::STAGE_STATIC, v1::STAGE_COMPILE, v1::STAGE_TINY_RUN,
                              v1::STAGE_MULTI_INPUT};
  for (const ScoredGroup& group : groups) {
    for (size_t i = 0; i < group.samples.size(); ++i) {
      if (!group.rewards[i].usable) continue;
      const v1::Verdict& verdict = group.samples[i].verdict();
      counted += 1;
      reward += group.rewards[i].total;
      for (int s = 0; s < 4; ++s) passed[s] += StagePassed(verdict, stages[s]) ? 1 : 0;
      const bool correct = verdict.correct() && !group.rewards[i].hacked;
      passed[4] += correct ? 1 : 0;
      auto& level = by_level[group.item.task().level()];
      level.first += correct ? 1 : 0;
      level.second += 1;
      if (correct && verdict.speedup_vs_eager() > 0) {
        figures->speedups.push_back(verdict.speedup_vs_eager());
        speedup_sum += verdict.speedup_vs_eager();
      }
      figures->staleness.push_back(policy_version - group.samples[i].sample().policy_version());
    }
  }
  SummariseTurns(groups, progress, figures);
  const double n = std::max(1.0, counted);
  progress->set_mean_reward(reward / n);
  v1::StagePassRates* rates = progress->mutable_pass_rates();
  rates->set_static_pass(passed[0] / n);
  rates->set_compile_pass(passed[1] / n);
  rates->set_tiny_run_pass(passed[2] / n);
  rates->set_multi_input_pass(passed[3] / n);
  rates->set_correct(passed[4] / n);
  progress->clear_correct_by_level();
  for (const auto& [level, counts] : by_level) {
    (*progress->mutable_correct_by_level())[level] = counts.first / std::max(1.0, counts.second);
  }
  progress->set_mean_speedup(figures->speedups.empty()
                                 ? 0
                                 : speedup_sum / static_cast<double>(figures->speedups.size()));
}

}  // namespace kforge
