// Reads the parts of a Hugging Face tokenizer.json that a byte-level BPE
// tokenizer (GPT-2, Qwen2/2.5/3, Llama 3) uses, into plain structs, and
// rejects anything this implementation would get wrong rather than guess:
// a model other than BPE, byte fallback, subword prefixes or suffixes,
// normalizers other than NFC, pre-tokenizers other than ByteLevel or
// Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)], split
// patterns other than the known ones, decoders other than ByteLevel.
//
//   KF_ASSIGN_OR_RETURN(TokenizerJson spec, ParseTokenizerJson(text));
//   spec.vocab.size();  // 151643 for Qwen2.5
//
// Not read: the post_processor (Encode adds no BOS/EOS; Llama 3's
// TemplateProcessing would), truncation, padding, model.dropout (encoding is
// deterministic) and model.unk_token (byte-level BPE never needs one).
#ifndef KFORGE_MODEL_TOKENIZER_TOKENIZER_JSON_H_
#define KFORGE_MODEL_TOKENIZER_TOKENIZER_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/tokenizer/pre_tokenizer.h"

namespace kforge::tokenizer {

struct AddedTokenSpec {
  int32_t id = 0;
  std::string content;
  bool special = false;      // dropped by Decode(skip_special=true)
  bool single_word = false;  // matched only where not inside a word
  bool lstrip = false;       // the match takes the whitespace before it
  bool rstrip = false;       // ... and after it
  bool normalized = false;   // matched after the non-normalized ones
};

struct TokenizerJson {
  // model.vocab, in the byte-to-unicode alphabet ("Ġthe").
  std::vector<std::pair<std::string, int32_t>> vocab;
  // model.merges in rank order.
  std::vector<std::pair<std::string, std::string>> merges;
  bool ignore_merges = false;  // model.ignore_merges (Llama 3)
  std::vector<AddedTokenSpec> added_tokens;
  // normalizer NFC. Text is not normalized (see BpeTokenizer), so this only
  // records what the file asked for.
  bool nfc_normalizer = false;
  // The pre-tokenizer's split pattern; none when it does not split.
  std::optional<SplitPattern> split;
  // ByteLevel.add_prefix_space: a space goes before each piece that does not
  // start with one; the pieces are the pre-tokens when a Split step comes
  // before ByteLevel, else the text between added tokens.
  bool add_prefix_space = false;
  bool split_before_byte_level = false;
};

// INVALID_ARGUMENT saying what is wrong and where ("model.merges entry 12:
// ..."); the caller adds the file name.
absl::StatusOr<TokenizerJson> ParseTokenizerJson(absl::string_view json);

}  // namespace kforge::tokenizer

#endif  // KFORGE_MODEL_TOKENIZER_TOKENIZER_JSON_H_
