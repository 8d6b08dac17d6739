#include "model/tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "model/tokenizer/unicode.h"

namespace kforge::tokenizer {
namespace {

constexpr absl::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr absl::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr absl::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Char {
  uint32_t offset;  // byte offset in the text
  char32_t cp;
  CharClass cls;
};

// The text as characters, with a sentinel holding the end offset.
std::vector<Char> Decode(absl::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size() + 1);
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Char c = DecodeUtf8(text, pos);
    chars.push_back({static_cast<uint32_t>(pos), c.code_point,
                     c.valid ? ClassifyCodePoint(c.code_point) : CharClass::kOther});
    pos += c.length;
  }
  chars.push_back({static_cast<uint32_t>(text.size()), 0, CharClass::kOther});
  return chars;
}

// Matches against characters [i, n) of the text; each returns the end index
// of the leftmost match starting at i, which is > i.
class Matcher {
 public:
  explicit Matcher(const std::vector<Char>& chars) : c_(chars), n_(chars.size() - 1) {}

  size_t Gpt2(size_t i) const {
    if (size_t end = Contraction(i, /*ignore_case=*/false); end != i) return end;
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the class of the first
    // character after the optional space picks the alternative.
    const size_t start = c_[i].cp == ' ' ? i + 1 : i;
    if (start < n_ && c_[start].cls != CharClass::kWhitespace) {
      return RunEnd(start, c_[start].cls);
    }
    return TrailingWhitespace(i);
  }

  size_t Qwen(size_t i, size_t max_digits) const {
    if (size_t end = Contraction(i, /*ignore_case=*/true); end != i) return end;
    // `[^\r\n\p{L}\p{N}]?\p{L}+`
    if (c_[i].cls == CharClass::kLetter) return RunEnd(i, CharClass::kLetter);
    if (!IsNewline(i) && c_[i].cls != CharClass::kNumber && i + 1 < n_ &&
        c_[i + 1].cls == CharClass::kLetter) {
      return RunEnd(i + 1, CharClass::kLetter);
    }
    // `\p{N}{1,max_digits}`
    if (c_[i].cls == CharClass::kNumber) {
      return RunEnd(i, CharClass::kNumber, i + max_digits);
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    const size_t start = c_[i].cp == ' ' ? i + 1 : i;
    if (start < n_ && c_[start].cls == CharClass::kOther) {
      size_t end = RunEnd(start, CharClass::kOther);
      while (end < n_ && IsNewline(end)) ++end;
      return end;
    }
    // c_[i] is whitespace from here on. `\s*[\r\n]+`: after backtracking,
    // the match ends just past the run's last line break.
    const size_t run_end = RunEnd(i, CharClass::kWhitespace);
    for (size_t k = run_end; k > i; --k) {
      if (IsNewline(k - 1)) return k;
    }
    return TrailingWhitespace(i);
  }

 private:
  // `\s+(?!\S)|\s+` at a whitespace character: the whole run at the end of
  // the text; otherwise the run less its last character, which goes with
  // the next piece (" world"); a lone whitespace character by itself.
  size_t TrailingWhitespace(size_t i) const {
    const size_t end = RunEnd(i, CharClass::kWhitespace);
    if (end == n_) return end;
    return end - i >= 2 ? end - 1 : i + 1;
  }

  // The end of the run of `cls` characters from i, stopping at `limit`.
  size_t RunEnd(size_t i, CharClass cls, size_t limit = SIZE_MAX) const {
    limit = std::min(limit, n_);
    while (i < limit && c_[i].cls == cls) ++i;
    return i;
  }

  bool IsNewline(size_t i) const { return c_[i].cp == '\r' || c_[i].cp == '\n'; }

  // Lower-cases for `(?i:...)`: ASCII, and U+017F LATIN SMALL LETTER LONG S,
  // which Unicode case folding maps to 's' (as Oniguruma and JS /iu do).
  char32_t Fold(size_t i, bool ignore_case) const {
    const char32_t cp = c_[i].cp;
    if (!ignore_case) return cp;
    if (cp >= 'A' && cp <= 'Z') return cp - 'A' + 'a';
    return cp == 0x17F ? U's' : cp;
  }

  // `'s|'t|'re|'ve|'m|'ll|'d`; returns i when none matches.
  size_t Contraction(size_t i, bool ignore_case) const {
    if (c_[i].cp != '\'' || i + 1 >= n_) return i;
    const char32_t a = Fold(i + 1, ignore_case);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 >= n_) return i;
    const char32_t b = Fold(i + 2, ignore_case);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
      return i + 3;
    }
    return i;
  }

  const std::vector<Char>& c_;
  const size_t n_;
};

}  // namespace

absl::string_view SplitPatternRegex(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::kGpt2:
      return kGpt2Regex;
    case SplitPattern::kQwen2:
      return kQwen2Regex;
    case SplitPattern::kLlama3:
      return kLlama3Regex;
  }
  return "";
}

absl::StatusOr<SplitPattern> SplitPatternFromRegex(absl::string_view regex) {
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kQwen2, SplitPattern::kLlama3}) {
    if (regex == SplitPatternRegex(p)) return p;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported pre-tokenizer split pattern \"", regex,
      "\" (supported: the GPT-2, Qwen2 and Llama 3 patterns)"));
}

void SplitPreTokens(SplitPattern pattern, absl::string_view text,
                    std::vector<absl::string_view>* out) {
  if (text.empty()) return;
  const std::vector<Char> chars = Decode(text);
  const Matcher matcher(chars);
  const size_t n = chars.size() - 1;
  size_t i = 0;
  while (i < n) {
    size_t end;
    switch (pattern) {
      case SplitPattern::kGpt2:
        end = matcher.Gpt2(i);
        break;
      case SplitPattern::kQwen2:
        end = matcher.Qwen(i, 1);
        break;
      case SplitPattern::kLlama3:
      default:
        end = matcher.Qwen(i, 3);
        break;
    }
    out->push_back(text.substr(chars[i].offset, chars[end].offset - chars[i].offset));
    i = end;
  }
}

}  // namespace kforge::tokenizer
