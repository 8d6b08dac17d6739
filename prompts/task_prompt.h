// The prompt a policy sees for a task: the job's PromptTemplate
// (instructions, an optional worked example, reasoning and answer tags)
// around the task's reference module, rendered in the model's chat format.
//
//   KF_ASSIGN_OR_RETURN(std::string prompt, RenderTaskPrompt(spec.prompt(), task));
//   // "<|im_start|>user\nWrite a faster ... ```python\n...```\n...<|im_end|>\n<|im_start|>assistant\n"
//
// Unset template fields take their annotated defaults. The learner (jobs)
// and `kforge eval --model` use the same text, so a model is evaluated on
// the prompts it was trained on.
#ifndef KFORGE_PROMPTS_TASK_PROMPT_H_
#define KFORGE_PROMPTS_TASK_PROMPT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/job.pb.h"
#include "kforge/v1/task.pb.h"

namespace kforge {

// The user message alone, before the chat format is applied.
absl::StatusOr<std::string> TaskInstructions(const v1::PromptTemplate& prompt, const v1::Task& task);

// The whole prompt text, ending where the assistant's answer begins.
// INVALID_ARGUMENT for an unknown chat format or a task without a reference.
absl::StatusOr<std::string> RenderTaskPrompt(const v1::PromptTemplate& prompt, const v1::Task& task);

// One earlier turn of a multi-turn trajectory (issue 24): what the policy
// answered and what it was told about that answer (RenderTurnFeedback in
// prompts/turn_feedback.h).
struct PastTurn {
  std::string completion;
  std::string feedback;
};

// The prompt of the turn after `turns`: the task's user message, then per
// earlier turn the assistant's answer without its reasoning and a user
// message with the feedback and the request to revise, ending where the
// next answer begins. Earlier reasoning is dropped (everything up to the
// last </think>; an answer cut off inside <think> becomes a one-line note),
// as Kevin-32B does, to bound the context: the answers and the feedback are
// what the next turn needs.
// INVALID_ARGUMENT as RenderTaskPrompt, or when `turns` is empty.
absl::StatusOr<std::string> RenderFollowUpPrompt(const v1::PromptTemplate& prompt,
                                                 const v1::Task& task,
                                                 const std::vector<PastTurn>& turns);

// RenderFollowUpPrompt within a token budget (the model's context less the
// completion's max_new_tokens), as `count_tokens` counts a rendered prompt.
// Over budget, earlier turns make room oldest first: first their answers
// are left out (a one-line note stands in, their feedback stays: what went
// wrong is what the next turn needs most, and an answer is the longest part
// of a turn), then whole earlier turns go. The last turn's answer and
// feedback always stay; when they alone are over budget that prompt is
// returned all the same, and the sampler gives the completion the room that
// is left (or refuses a prompt that leaves none).
absl::StatusOr<std::string> RenderBoundedFollowUpPrompt(
    const v1::PromptTemplate& prompt, const v1::Task& task, std::vector<PastTurn> turns,
    int64_t budget_tokens, const std::function<int64_t(const std::string&)>& count_tokens);

// What stands in for an answer RenderBoundedFollowUpPrompt left out.
inline constexpr char kAnswerLeftOut[] =
    "(this earlier answer is left out to fit the context; the feedback on it follows)";

}  // namespace kforge

#endif  // KFORGE_PROMPTS_TASK_PROMPT_H_
