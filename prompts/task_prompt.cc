#include "prompts/task_prompt.h"

#include "absl/strings/str_cat.h"
#include "common/config/proto_defaults.h"
#include "common/status_macros.h"
#include "model/tokenizer/chat_template.h"

namespace kforge {

namespace {

// How the answer must look, as both the first turn and a revision ask.
std::string AnswerFormat(bool reasoning_tags) {
  return reasoning_tags ? "Think it through inside <think></think>, then give the complete "
                          "module with class ModelNew in one ```python block inside "
                          "<answer></answer>."
                        : "Give the complete module with class ModelNew in one ```python "
                          "block.";
}

// An earlier answer as the next turn shows it: what follows its last
// </think>; an answer whose <think> never closed (cut off at
// max_new_tokens) is all reasoning, and shows as a note saying so.
std::string AnswerWithoutReasoning(const std::string& completion) {
  constexpr std::string_view kClose = "</think>";
  std::string answer = completion;
  if (const size_t close = completion.rfind(kClose); close != std::string::npos) {
    answer = completion.substr(close + kClose.size());
  } else if (completion.find("<think>") != std::string::npos) {
    return "(this answer was cut off while still reasoning; it gave no code)";
  }
  const size_t start = answer.find_first_not_of(" \t\r\n");
  answer.erase(0, start == std::string::npos ? answer.size() : start);
  return answer;
}

}  // namespace

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
  absl::StrAppend(&text, AnswerFormat(prompt.reasoning_tags()));
  return text;
}

absl::StatusOr<std::string> RenderTaskPrompt(const v1::PromptTemplate& raw, const v1::Task& task) {
  v1::PromptTemplate prompt = raw;
  KF_RETURN_IF_ERROR(ApplyProtoDefaults(&prompt));
  KF_ASSIGN_OR_RETURN(std::string user, TaskInstructions(prompt, task));
  return RenderChat(prompt.chat_format(), {{"user", std::move(user)}},
                    /*add_generation_prompt=*/true);
}

absl::StatusOr<std::string> RenderFollowUpPrompt(const v1::PromptTemplate& raw, const v1::Task& task,
                                                 const std::vector<PastTurn>& turns) {
  if (turns.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", task.id(), ": a follow-up prompt needs an earlier turn"));
  }
  v1::PromptTemplate prompt = raw;
  KF_RETURN_IF_ERROR(ApplyProtoDefaults(&prompt));
  KF_ASSIGN_OR_RETURN(std::string user, TaskInstructions(prompt, task));
  std::vector<ChatMessage> messages = {{"user", std::move(user)}};
  for (const PastTurn& turn : turns) {
    messages.push_back({"assistant", AnswerWithoutReasoning(turn.completion)});
    messages.push_back({"user", absl::StrCat("The verifier's feedback on your answer:\n", turn.feedback,
                                             "\n\nRevise your ModelNew. ",
                                             AnswerFormat(prompt.reasoning_tags()))});
  }
  return RenderChat(prompt.chat_format(), messages, /*add_generation_prompt=*/true);
}

absl::StatusOr<std::string> RenderBoundedFollowUpPrompt(
    const v1::PromptTemplate& prompt, const v1::Task& task, std::vector<PastTurn> turns,
    int64_t budget_tokens, const std::function<int64_t(const std::string&)>& count_tokens) {
  KF_ASSIGN_OR_RETURN(std::string text, RenderFollowUpPrompt(prompt, task, turns));
  if (!count_tokens || turns.size() < 2) return text;
  // Oldest answers first, then oldest whole turns; never the last one.
  for (size_t k = 0; k + 1 < turns.size() && count_tokens(text) > budget_tokens; ++k) {
    turns[k].completion = kAnswerLeftOut;
    KF_ASSIGN_OR_RETURN(text, RenderFollowUpPrompt(prompt, task, turns));
  }
  while (turns.size() > 1 && count_tokens(text) > budget_tokens) {
    turns.erase(turns.begin());
    KF_ASSIGN_OR_RETURN(text, RenderFollowUpPrompt(prompt, task, turns));
  }
  return text;
}

}  // namespace kforge
