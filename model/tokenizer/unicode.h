// The little Unicode the byte-level BPE tokenizer needs: a UTF-8 decoder that
// reports ill-formed input the way Rust's String::from_utf8_lossy does, an
// encoder, and the character classes the pre-tokenizer patterns test
// (\p{L}, \p{N}, \s).
//
//   size_t pos = 0;
//   while (pos < text.size()) {
//     const Utf8Char c = DecodeUtf8(text, pos);
//     if (ClassifyCodePoint(c.code_point) == CharClass::kLetter) { ... }
//     pos += c.length;
//   }
#ifndef KFORGE_MODEL_TOKENIZER_UNICODE_H_
#define KFORGE_MODEL_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace kforge::tokenizer {

inline constexpr char32_t kReplacementChar = 0xFFFD;

struct Utf8Char {
  char32_t code_point;  // kReplacementChar when !valid
  size_t length;        // bytes consumed, >= 1
  bool valid;
};

// Decodes the character at text[pos] (pos < text.size()). An ill-formed
// sequence yields valid=false and the length of its maximal subpart (Unicode
// 3.9, table 3-7), the unit that from_utf8_lossy replaces with U+FFFD.
Utf8Char DecodeUtf8(absl::string_view text, size_t pos);

// Appends the UTF-8 form of `cp` (a scalar value: no surrogates, <= 0x10FFFF).
void AppendUtf8(char32_t cp, std::string* out);

// Valid UTF-8 as Rust's String::from_utf8_lossy makes it: each maximal
// ill-formed subpart becomes U+FFFD.
std::string Utf8Lossy(absl::string_view bytes);

enum class CharClass : unsigned char {
  kLetter,      // general category L (Lu Ll Lt Lm Lo)
  kNumber,      // general category N (Nd Nl No)
  kWhitespace,  // the White_Space property: what \s matches in Oniguruma
  kOther,
};

// Letters and numbers come from tables generated from Python's unicodedata
// (see gen_unicode_tables.py for the Unicode version); code points assigned
// after that version are kOther. JavaScript's \s differs from White_Space in
// U+0085 (not \s in JS) and U+FEFF (\s in JS only); this follows White_Space,
// as Hugging Face tokenizers (Oniguruma) does.
CharClass ClassifyCodePoint(char32_t cp);

}  // namespace kforge::tokenizer

#endif  // KFORGE_MODEL_TOKENIZER_UNICODE_H_
