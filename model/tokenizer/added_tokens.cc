#include "model/tokenizer/added_tokens.h"

#include "model/tokenizer/unicode.h"

namespace kforge::tokenizer {
namespace {

// Rust's char::is_alphanumeric() || c == '_', which Hugging Face uses for
// single_word; Alphabetic is approximated by general category L.
bool IsWordChar(char32_t cp) {
  const CharClass cls = ClassifyCodePoint(cp);
  return cp == '_' || cls == CharClass::kLetter || cls == CharClass::kNumber;
}

bool IsWhitespace(char32_t cp) { return ClassifyCodePoint(cp) == CharClass::kWhitespace; }

// The character that ends text[0, end), and where it starts (via `start`);
// U+FFFD for ill-formed bytes.
char32_t CharBefore(absl::string_view text, size_t end, size_t* start = nullptr) {
  size_t lead = end - 1;
  while (lead > 0 && end - lead < 4 && (static_cast<unsigned char>(text[lead]) & 0xC0) == 0x80) {
    --lead;
  }
  const Utf8Char c = DecodeUtf8(text, lead);
  const bool whole = c.valid && lead + c.length == end;
  if (start != nullptr) *start = whole ? lead : end - 1;
  return whole ? c.code_point : kReplacementChar;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<const AddedTokenSpec*>& tokens) {
  node_token_.push_back(-1);
  for (const AddedTokenSpec* spec : tokens) {
    int32_t node = 0;
    for (unsigned char byte : spec->content) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | byte;
      auto [it, inserted] = edges_.try_emplace(key, static_cast<int32_t>(node_token_.size()));
      if (inserted) node_token_.push_back(-1);
      node = it->second;
    }
    if (node == 0) continue;  // empty content: never matches
    node_token_[node] = static_cast<int32_t>(tokens_.size());
    tokens_.push_back({spec->id, spec->single_word, spec->lstrip, spec->rstrip});
    first_bytes_.set(static_cast<unsigned char>(spec->content[0]));
  }
}

bool AddedTokenMatcher::LongestMatchAt(absl::string_view text, size_t pos, size_t* token,
                                       size_t* length) const {
  int32_t node = 0;
  bool found = false;
  for (size_t i = pos; i < text.size(); ++i) {
    const uint64_t key =
        (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]);
    const auto it = edges_.find(key);
    if (it == edges_.end()) break;
    node = it->second;
    if (node_token_[node] >= 0) {
      *token = static_cast<size_t>(node_token_[node]);
      *length = i + 1 - pos;
      found = true;
    }
  }
  return found;
}

void AddedTokenMatcher::Split(absl::string_view text, std::vector<TextPiece>* out) const {
  size_t emitted = 0;  // text before this is already in `out`
  size_t pos = 0;
  while (pos < text.size()) {
    size_t index, length;
    if (!first_bytes_.test(static_cast<unsigned char>(text[pos])) ||
        !LongestMatchAt(text, pos, &index, &length)) {
      ++pos;
      continue;
    }
    const Token& token = tokens_[index];
    size_t start = pos, stop = pos + length;
    if (token.single_word) {
      const bool word_before = start > 0 && IsWordChar(CharBefore(text, start));
      const bool word_after = stop < text.size() && IsWordChar(DecodeUtf8(text, stop).code_point);
      if (word_before || word_after) {
        pos = stop;  // matches do not overlap, as in Aho-Corasick's iteration
        continue;
      }
    }
    if (token.lstrip) {
      size_t prev;
      while (start > emitted && IsWhitespace(CharBefore(text, start, &prev)) && prev >= emitted) {
        start = prev;
      }
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        const Utf8Char c = DecodeUtf8(text, stop);
        if (!c.valid || !IsWhitespace(c.code_point)) break;
        stop += c.length;
      }
    }
    if (start > emitted) out->push_back({text.substr(emitted, start - emitted), -1});
    out->push_back({text.substr(start, stop - start), token.id});
    emitted = pos = stop;
  }
  if (emitted < text.size()) out->push_back({text.substr(emitted), -1});
}

}  // namespace kforge::tokenizer
