// Turns a model's raw completion into the Python source the verifier runs.
//
// Models wrap their answer in many ways: Markdown fences (``` or ~~~, with or
// without a language tag, sometimes never closed because the sample hit its
// token limit), <answer> tags, reasoning in <think> tags, leftover chat
// template tokens. The rules, in order:
//
//   1. CRLF becomes LF; chat markup is removed: `<|im_start|>` with the role
//      that follows it, `<|start_header_id|>...<|end_header_id|>`, and any
//      other `<|name|>` token (`<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`).
//   2. Reasoning is ignored: every `<think>...</think>` span, everything
//      before a `</think>` that has no opening tag (templates that put
//      `<think>` in the prompt), and everything after an unclosed `<think>`.
//      Code inside the reasoning is never chosen.
//   3. The remaining text yields candidates: each fenced block (an unclosed
//      last fence runs to the end) and the body of each <answer> tag that
//      holds no fence. Of these, the last one that defines `class ModelNew`
//      wins, preferring those inside an <answer> tag; then the last
//      Python-tagged block (```python, ```py, ```Python3, ...); then the last
//      <answer> body; then the last untagged block. Blocks tagged with another
//      language (```bash, ```text) are taken only if they define ModelNew.
//   4. With no candidate, a text that defines `class ModelNew` is itself the
//      code, from its first line that looks like Python (import, from, class,
//      def, a decorator or a comment).
//   5. Otherwise INVALID_ARGUMENT.
//
// Code that defines no ModelNew is still returned: whether the candidate is
// a valid submission is for the funnel's first stage to say, not this one.
//
//   KF_ASSIGN_OR_RETURN(ExtractedCode extracted, ExtractCandidateCode(completion));
//   LOG(INFO) << "verifying " << extracted.how;
#ifndef KFORGE_VERIFIER_WORKER_EXTRACT_CODE_EXTRACTION_H_
#define KFORGE_VERIFIER_WORKER_EXTRACT_CODE_EXTRACTION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kforge {

struct ExtractedCode {
  // The source, without the fence lines, ending in exactly one newline.
  std::string code;
  // Where it came from, for logs and reports: "fenced block 2 of 3
  // (```python)", "fenced block 1 of 1 (```) inside <answer> tag",
  // "<answer> tag", "whole text", "text from line 4".
  std::string how;
};

// INVALID_ARGUMENT "no code found in the completion (no fenced block, no
// <answer> tag, no class ModelNew)" when the completion holds no code.
absl::StatusOr<ExtractedCode> ExtractCandidateCode(absl::string_view completion);

// Whether `code` has a line `class ModelNew` followed by `(` or `:`.
bool DefinesModelNew(absl::string_view code);

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_EXTRACT_CODE_EXTRACTION_H_
