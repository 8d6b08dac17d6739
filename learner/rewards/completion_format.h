// AnalyzeCompletionFormat: how well a completion follows the answer format
// the prompt asked for (prompts/task_prompt.cc), for the format
// reward term, and where its reasoning and code parts lie, for hierarchical
// rewards (the learner maps the byte ranges onto tokens).
//
// With reasoning tags (PromptTemplate.reasoning_tags) the prompt asks for
//
//   <think>plan</think>
//   <answer>
//   ```python
//   class ModelNew(...): ...
//   ```
//   </answer>
//
// and the score is
//   1.0  a non-empty <think> block opens the completion (only whitespace
//        before it, one <think> and one </think> in the whole text) and is
//        followed by one <answer> block whose body holds exactly one closed
//        fenced block tagged python, py, python3 or nothing;
//   0.5  the answer part is like that but the think block is missing or
//        malformed (empty, text before it, several, a stray </think>);
//   0.0  otherwise: an unclosed <think>, no <answer> block, several, an
//        unclosed one, no fenced block in it, several, an unclosed fence, or a
//        block tagged with another language.
// Without reasoning tags the score is 1.0 when the text after the reasoning
// (the whole text when there is no think block) holds exactly one closed
// python-or-untagged fenced block and no unclosed <think>, else 0.0.
//
// Fences are lines starting (after indentation) with ``` or ~~~, closed by a
// line starting with the same three characters; an <answer> tag counts as a
// line break, so "<answer>```python" and "```</answer>" work. Text around the
// blocks (prose, trailing chat markup such as <|im_end|>) is allowed. Tags
// are matched literally and case-sensitively.
//
// Ranges: [reasoning_begin, reasoning_end) is [0, end of </think>) when the
// think block is well-formed (leading whitespace goes with it), else empty at
// 0; [code_begin, code_end) is the rest of the text. Together they cover the
// completion exactly.
//
//   CompletionFormat format = AnalyzeCompletionFormat(completion, prompt.reasoning_tags());
//   double term = spec.format_weight() * format.score;
//   absl::string_view code_part = completion.substr(format.code_begin,
//                                                   format.code_end - format.code_begin);
#ifndef KFORGE_LEARNER_REWARDS_COMPLETION_FORMAT_H_
#define KFORGE_LEARNER_REWARDS_COMPLETION_FORMAT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace kforge {

struct CompletionFormat {
  // A well-formed, non-empty <think>...</think> block opens the completion.
  bool has_think = false;
  // Exactly one <answer>...</answer> block after the reasoning.
  bool has_answer = false;
  // Closed fenced blocks in the <answer> body, or in the text after the
  // reasoning when there is no answer block.
  int code_blocks = 0;
  // In [0, 1]; see the header comment.
  double score = 0;
  size_t reasoning_begin = 0;
  size_t reasoning_end = 0;
  size_t code_begin = 0;
  size_t code_end = 0;
  // Why the score is below 1 ("no <think> block", "2 fenced blocks in the
  // answer"); empty at 1.
  std::string problem;
};

CompletionFormat AnalyzeCompletionFormat(std::string_view completion, bool reasoning_tags);

}  // namespace kforge

#endif  // KFORGE_LEARNER_REWARDS_COMPLETION_FORMAT_H_
