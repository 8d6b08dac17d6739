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

}  // namespace kforge

#endif  // KFORGE_PROMPTS_TASK_PROMPT_H_
