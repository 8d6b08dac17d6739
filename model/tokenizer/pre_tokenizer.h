// The split step of byte-level BPE pre-tokenization: cuts text into the
// pieces ("pre-tokens") that BPE then encodes one by one. Instead of a regex
// engine, each supported pattern has a hand-written matcher that returns what
// the regex's leftmost match would (alternatives tried in order, with the
// backtracking of `\s+(?!\S)` and `\s*[\r\n]+` worked out by hand). Known
// patterns, recognised by exact string compare with the tokenizer.json text:
//
//   kGpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//            (GPT-2; what ByteLevel(use_regex=true) applies)
//   kQwen2   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
//            | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (one string)
//            (Qwen2, Qwen2.5, Qwen3: one digit per piece)
//   kLlama3  the same with \p{N}{1,3} (Llama 3: digits in runs of up to three)
//
//   KF_ASSIGN_OR_RETURN(SplitPattern pattern, SplitPatternFromRegex(regex_text));
//   std::vector<absl::string_view> pieces;
//   SplitPreTokens(pattern, "Hello world's", &pieces);  // "Hello", " world", "'s"
#ifndef KFORGE_MODEL_TOKENIZER_PRE_TOKENIZER_H_
#define KFORGE_MODEL_TOKENIZER_PRE_TOKENIZER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kforge::tokenizer {

enum class SplitPattern { kGpt2, kQwen2, kLlama3 };

// The regex text of `pattern`, exactly as tokenizer.json spells it.
absl::string_view SplitPatternRegex(SplitPattern pattern);

// INVALID_ARGUMENT naming `regex` when it is none of the known patterns.
absl::StatusOr<SplitPattern> SplitPatternFromRegex(absl::string_view regex);

// Appends the pieces of `text` to `out`; they cover `text` exactly, in order.
// Ill-formed UTF-8 is tolerated: each maximal ill-formed subpart counts as
// one character that is neither letter, number nor whitespace.
void SplitPreTokens(SplitPattern pattern, absl::string_view text,
                    std::vector<absl::string_view>* out);

}  // namespace kforge::tokenizer

#endif  // KFORGE_MODEL_TOKENIZER_PRE_TOKENIZER_H_
