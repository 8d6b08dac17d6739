#include "model/tokenizer/unicode.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace kforge::tokenizer {
namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
  CharClass cls;
};

constexpr CharClass kLetter = CharClass::kLetter;
constexpr CharClass kNumber = CharClass::kNumber;

constexpr CodePointRange kLetterNumberRanges[] = {
#include "model/tokenizer/unicode_tables.inc"
};

bool IsWhiteSpace(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20:
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

}  // namespace

Utf8Char DecodeUtf8(absl::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {lead, 1, true};
  size_t need;
  char32_t cp;
  // Bounds of the second byte; later bytes are plain continuations.
  unsigned char lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
    cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    cp = lead & 0x0F;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    cp = lead & 0x07;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return {kReplacementChar, 1, false};
  }
  size_t i = 1;
  for (; i <= need && pos + i < text.size(); ++i) {
    const unsigned char b = byte(i);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : IsContinuation(b);
    if (!ok) break;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (i <= need) return {kReplacementChar, i, false};
  return {cp, need + 1, true};
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Utf8Lossy(absl::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Char c = DecodeUtf8(bytes, pos);
    if (c.valid) {
      out.append(bytes.data() + pos, c.length);
    } else {
      AppendUtf8(kReplacementChar, &out);
    }
    pos += c.length;
  }
  return out;
}

CharClass ClassifyCodePoint(char32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return CharClass::kLetter;
    if (cp >= '0' && cp <= '9') return CharClass::kNumber;
    return IsWhiteSpace(cp) ? CharClass::kWhitespace : CharClass::kOther;
  }
  if (IsWhiteSpace(cp)) return CharClass::kWhitespace;
  const auto* end = std::end(kLetterNumberRanges);
  const auto* it = std::upper_bound(
      std::begin(kLetterNumberRanges), end, cp,
      [](char32_t value, const CodePointRange& range) { return value < range.first; });
  if (it == std::begin(kLetterNumberRanges)) return CharClass::kOther;
  --it;
  return cp <= it->last ? it->cls : CharClass::kOther;
}

}  // namespace kforge::tokenizer
