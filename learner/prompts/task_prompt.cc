#include "learner/prompts/task_prompt.h"

#include "absl/strings/str_cat.h"
#include "common/config/proto_defaults.h"
#include "common/status_macros.h"
#include "model/tokenizer/chat_template.h"

namespace kforge {

absl::StatusOr<std::string> TaskInstructions(const v1::PromptTemplate& raw, const v1::Task& task) {
  if (task.reference_source().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("task ", task.id(), ": no reference source"));
  }
  v1::PromptTemplate prompt = raw;
  KF_RETURN_IF_ERROR(ApplyProtoDefaults(&prompt));
  std::string text = prompt.instructions();
  if (!prompt.example().empty()) absl::StrAppend(&text, "\n\nExample:\n", prompt.example());
  absl::StrAppend(&text, "\n\nReference implementation:\n```python\n", task.reference_source());
  if (text.back() != '\n') text.push_back('\n');
  absl::StrAppend(&text, "```\n\n");
  absl::StrAppend(&text, prompt.reasoning_tags()
                             ? "Think it through inside <think></think>, then give the complete "
                               "module with class ModelNew in one ```python block inside "
                               "<answer></answer>."
                             : "Give the complete module with class ModelNew in one ```python "
                               "block.");
  return text;
}

absl::StatusOr<std::string> RenderTaskPrompt(const v1::PromptTemplate& raw, const v1::Task& task) {
  v1::PromptTemplate prompt = raw;
  KF_RETURN_IF_ERROR(ApplyProtoDefaults(&prompt));
  KF_ASSIGN_OR_RETURN(std::string user, TaskInstructions(prompt, task));
  return RenderChat(prompt.chat_format(), {{"user", std::move(user)}},
                    /*add_generation_prompt=*/true);
}

}  // namespace kforge
