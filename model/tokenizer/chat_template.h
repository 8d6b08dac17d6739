// Renders a conversation as the prompt text a chat model was trained on,
// without a Jinja engine: the model families kforge trains have fixed
// templates, named by format.
//
//   "chatml"  (Qwen)     <|im_start|>system\nYou write Triton.<|im_end|>\n
//                        <|im_start|>user\nWrite a ReLU.<|im_end|>\n
//                        <|im_start|>assistant\n              <- generation prompt
//   "llama3"  (Llama 3)  <|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n
//                        Write a ReLU.<|eot_id|>
//                        <|start_header_id|>assistant<|end_header_id|>\n\n   <- generation prompt
//   "plain"              the contents joined by blank lines; no generation prompt
//
//   KF_ASSIGN_OR_RETURN(std::string prompt,
//                       RenderChat("chatml", {{"user", "Write a ReLU."}},
//                                  /*add_generation_prompt=*/true));
//   std::vector<int32_t> ids = tokenizer->Encode(prompt);  // markers become special ids
//
// As the models' own templates do, "llama3" trims whitespace around each
// content. Neither format adds a default system message (Qwen2.5's template
// would add "You are Qwen, ..." when there is none).
#ifndef KFORGE_MODEL_TOKENIZER_CHAT_TEMPLATE_H_
#define KFORGE_MODEL_TOKENIZER_CHAT_TEMPLATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kforge {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

// INVALID_ARGUMENT for an unknown format (naming it and the known ones) or,
// in chatml/llama3, a message whose role is empty or holds a line break.
absl::StatusOr<std::string> RenderChat(absl::string_view format,
                                       const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt);

}  // namespace kforge

#endif  // KFORGE_MODEL_TOKENIZER_CHAT_TEMPLATE_H_
