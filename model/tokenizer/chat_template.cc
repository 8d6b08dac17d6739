#include "model/tokenizer/chat_template.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

absl::Status CheckRoles(absl::string_view format, const std::vector<ChatMessage>& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role.empty() || absl::StrContains(role, '\n') || absl::StrContains(role, '\r')) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chat format ", format, ": message ", i, " has role \"", role,
          "\" (must be non-empty, one line)"));
    }
  }
  return absl::OkStatus();
}

std::string RenderChatMl(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  }
  if (add_generation_prompt) absl::StrAppend(&out, "<|im_start|>assistant\n");
  return out;
}

std::string RenderLlama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out = "<|begin_of_text|>";
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
                    absl::StripAsciiWhitespace(m.content), "<|eot_id|>");
  }
  if (add_generation_prompt) {
    absl::StrAppend(&out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> RenderChat(absl::string_view format,
                                       const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt) {
  if (format == "chatml") {
    KF_RETURN_IF_ERROR(CheckRoles(format, messages));
    return RenderChatMl(messages, add_generation_prompt);
  }
  if (format == "llama3") {
    KF_RETURN_IF_ERROR(CheckRoles(format, messages));
    return RenderLlama3(messages, add_generation_prompt);
  }
  if (format == "plain") {
    return absl::StrJoin(messages, "\n\n", [](std::string* out, const ChatMessage& m) {
      out->append(m.content);
    });
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown chat format \"", format, "\" (known: chatml, llama3, plain)"));
}

}  // namespace kforge
