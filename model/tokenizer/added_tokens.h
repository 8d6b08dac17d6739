// Finds a tokenizer's added tokens (<|im_start|>, <|endoftext|>, ...) in
// text, so that they become single ids and BPE never sees them. Matching is
// leftmost-longest, as Hugging Face's Aho-Corasick matcher does: the earliest
// match wins, and among matches that start there the longest. The per-token
// options of tokenizer.json apply: single_word (no match inside a word),
// lstrip / rstrip (the match swallows neighbouring whitespace).
//
//   AddedTokenMatcher matcher({&im_start, &im_end});
//   std::vector<TextPiece> pieces;
//   matcher.Split("<|im_start|>user\nhi", &pieces);
//   // {id=151644}, {text="user\nhi"}
#ifndef KFORGE_MODEL_TOKENIZER_ADDED_TOKENS_H_
#define KFORGE_MODEL_TOKENIZER_ADDED_TOKENS_H_

#include <bitset>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "model/tokenizer/tokenizer_json.h"

namespace kforge::tokenizer {

// A span of text still to be encoded (id < 0), or an added token's id.
struct TextPiece {
  absl::string_view text;
  int32_t id = -1;
};

class AddedTokenMatcher {
 public:
  // The specs must outlive the matcher's construction only.
  explicit AddedTokenMatcher(const std::vector<const AddedTokenSpec*>& tokens);

  bool empty() const { return tokens_.empty(); }

  // Appends `text` cut at the matches: non-empty text pieces and token ids,
  // in order.
  void Split(absl::string_view text, std::vector<TextPiece>* out) const;

 private:
  struct Token {
    int32_t id;
    bool single_word, lstrip, rstrip;
  };
  // Longest token starting at text[pos]: its index in tokens_ and length.
  bool LongestMatchAt(absl::string_view text, size_t pos, size_t* token, size_t* length) const;

  std::vector<Token> tokens_;
  // Trie over the token contents: edges keyed by (node << 8 | byte); a node's
  // token index, or -1, in node_token_. Node 0 is the root.
  absl::flat_hash_map<uint64_t, int32_t> edges_;
  std::vector<int32_t> node_token_;
  std::bitset<256> first_bytes_;
};

}  // namespace kforge::tokenizer

#endif  // KFORGE_MODEL_TOKENIZER_ADDED_TOKENS_H_
