#include "verifier_worker/extract/code_extraction.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kforge {
namespace {

constexpr absl::string_view kThinkOpen = "<think>";
constexpr absl::string_view kThinkClose = "</think>";
constexpr absl::string_view kAnswerOpen = "<answer>";
constexpr absl::string_view kAnswerClose = "</answer>";
constexpr absl::string_view kHeaderEnd = "<|end_header_id|>";
// Chat-template tokens are short; a longer `<|...` is not one.
constexpr size_t kMaxTokenNameLength = 64;

bool IsTokenNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '-'; }

// `<|name|>` at `pos`: the name, else empty.
absl::string_view ChatTokenAt(absl::string_view text, size_t pos) {
  if (!absl::StartsWith(text.substr(pos), "<|")) return "";
  size_t end = pos + 2;
  while (end < text.size() && end - pos - 2 <= kMaxTokenNameLength && IsTokenNameChar(text[end])) {
    ++end;
  }
  if (end == pos + 2 || !absl::StartsWith(text.substr(end), "|>")) return "";
  return text.substr(pos + 2, end - pos - 2);
}

// Rule 1 of the header, after CRLF has become LF.
std::string StripChatMarkup(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const absl::string_view name = ChatTokenAt(text, pos);
    if (name.empty()) {
      out.push_back(text[pos++]);
      continue;
    }
    pos += name.size() + 4;
    if (name == "start_header_id") {
      const size_t end = text.find(kHeaderEnd, pos);
      if (end != absl::string_view::npos) pos = end + kHeaderEnd.size();
    } else if (name == "im_start") {
      // The role ("assistant") follows on the same line.
      while (pos < text.size() && IsTokenNameChar(text[pos])) ++pos;
    }
  }
  return out;
}

struct WithoutReasoning {
  std::string text;
  bool dropped = false;  // whether any reasoning was removed
};

// Rule 2 of the header.
WithoutReasoning StripReasoning(absl::string_view text) {
  WithoutReasoning result;
  size_t pos = 0;
  const size_t first_open = text.find(kThinkOpen);
  const size_t first_close = text.find(kThinkClose);
  if (first_close != absl::string_view::npos && first_close < first_open) {
    pos = first_close + kThinkClose.size();
    result.dropped = true;
  }
  while (pos <= text.size()) {
    const size_t open = text.find(kThinkOpen, pos);
    if (open == absl::string_view::npos) {
      absl::StrAppend(&result.text, text.substr(pos));
      break;
    }
    absl::StrAppend(&result.text, text.substr(pos, open - pos));
    result.dropped = true;
    const size_t close = text.find(kThinkClose, open + kThinkOpen.size());
    if (close == absl::string_view::npos) break;
    pos = close + kThinkClose.size();
  }
  return result;
}

// A stretch of the text, inside an <answer> tag or not.
struct Segment {
  absl::string_view text;
  bool in_answer = false;
};

std::vector<Segment> SplitAnswerTags(absl::string_view text) {
  std::vector<Segment> segments;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t open = text.find(kAnswerOpen, pos);
    if (open == absl::string_view::npos) {
      segments.push_back({text.substr(pos), false});
      break;
    }
    segments.push_back({text.substr(pos, open - pos), false});
    const size_t body = open + kAnswerOpen.size();
    const size_t close = text.find(kAnswerClose, body);
    if (close == absl::string_view::npos) {
      segments.push_back({text.substr(body), true});
      break;
    }
    segments.push_back({text.substr(body, close - body), true});
    pos = close + kAnswerClose.size();
  }
  return segments;
}

size_t LeadingWhitespace(absl::string_view line) {
  size_t n = 0;
  while (n < line.size() && (line[n] == ' ' || line[n] == '\t')) ++n;
  return n;
}

struct Fence {
  char marker = '`';
  size_t length = 0;     // how many markers opened it
  size_t indent = 0;     // its indentation, removed from the content lines
  std::string opening;   // as written, for `how`: "```python"
  std::string language;  // lower case; empty when untagged
};

// An opening fence line: 3+ backticks or tildes and an optional info string.
bool ParseOpeningFence(absl::string_view line, Fence* fence) {
  const size_t indent = LeadingWhitespace(line);
  line.remove_prefix(indent);
  if (line.empty() || (line[0] != '`' && line[0] != '~')) return false;
  const char marker = line[0];
  size_t length = 0;
  while (length < line.size() && line[length] == marker) ++length;
  if (length < 3) return false;
  const absl::string_view info = absl::StripAsciiWhitespace(line.substr(length));
  // "```x```" on one line is inline code, not a fence.
  if (marker == '`' && absl::StrContains(info, '`')) return false;
  const absl::string_view word = info.substr(0, std::min(info.find_first_of(" \t{"), info.size()));
  fence->marker = marker;
  fence->length = length;
  fence->indent = indent;
  fence->opening = absl::StrCat(line.substr(0, length), word);
  fence->language = absl::AsciiStrToLower(word);
  return true;
}

bool IsClosingFence(absl::string_view line, const Fence& fence) {
  line = absl::StripAsciiWhitespace(line);
  return line.size() >= fence.length &&
         line.find_first_not_of(fence.marker) == absl::string_view::npos;
}

bool IsPythonTag(absl::string_view language) {
  return language == "python" || language == "py" || language == "python3" || language == "py3";
}

enum class CandidateKind { kPythonFence, kUntaggedFence, kOtherFence, kAnswerBody };

struct Candidate {
  std::string code;
  std::string how;
  CandidateKind kind = CandidateKind::kAnswerBody;
  bool in_answer = false;
};

// Higher wins, the later of equals wins, 0 never wins (rule 3).
int Rank(const Candidate& c) {
  if (absl::StripAsciiWhitespace(c.code).empty()) return 0;
  if (DefinesModelNew(c.code)) return c.in_answer ? 6 : 5;
  if (c.kind == CandidateKind::kOtherFence) return 0;
  if (c.in_answer) return 4;
  return c.kind == CandidateKind::kPythonFence ? 3 : 2;
}

// Removes the whitespace prefix all non-blank lines share, blank lines at the
// start and whitespace at the end; the result ends in one newline.
std::string Tidy(const std::vector<absl::string_view>& lines) {
  std::vector<absl::string_view> kept(lines.begin(), lines.end());
  while (!kept.empty() && absl::StripAsciiWhitespace(kept.front()).empty()) {
    kept.erase(kept.begin());
  }
  while (!kept.empty() && absl::StripAsciiWhitespace(kept.back()).empty()) kept.pop_back();
  if (kept.empty()) return "";
  absl::string_view common;
  bool first = true;
  for (absl::string_view line : kept) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const absl::string_view indent = line.substr(0, LeadingWhitespace(line));
    if (first) {
      common = indent;
      first = false;
    }
    size_t n = 0;
    while (n < common.size() && n < indent.size() && common[n] == indent[n]) ++n;
    common = common.substr(0, n);
  }
  for (absl::string_view& line : kept) {
    line.remove_prefix(std::min(common.size(), line.size()));
  }
  std::string code = absl::StrJoin(kept, "\n");
  absl::StripTrailingAsciiWhitespace(&code);
  code.push_back('\n');
  return code;
}

// Appends the fenced blocks of one segment, or its body when it is an
// <answer> tag with no fence. `how` is completed by the caller.
void CollectCandidates(const Segment& segment, std::vector<Candidate>* out) {
  const std::vector<absl::string_view> lines = absl::StrSplit(segment.text, '\n');
  bool any_fence = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    Fence fence;
    if (!ParseOpeningFence(lines[i], &fence)) continue;
    any_fence = true;
    std::vector<absl::string_view> body;
    size_t j = i + 1;
    for (; j < lines.size() && !IsClosingFence(lines[j], fence); ++j) {
      absl::string_view line = lines[j];
      line.remove_prefix(std::min(fence.indent, LeadingWhitespace(line)));
      body.push_back(line);
    }
    Candidate candidate;
    candidate.code = Tidy(body);
    candidate.kind = fence.language.empty()        ? CandidateKind::kUntaggedFence
                     : IsPythonTag(fence.language) ? CandidateKind::kPythonFence
                                                   : CandidateKind::kOtherFence;
    candidate.in_answer = segment.in_answer;
    candidate.how = absl::StrCat("(", fence.opening, j >= lines.size() ? ", unterminated" : "", ")",
                                 segment.in_answer ? " inside <answer> tag" : "");
    out->push_back(std::move(candidate));
    i = j;
  }
  if (segment.in_answer && !any_fence) {
    Candidate candidate;
    candidate.code = Tidy(lines);
    candidate.how = "<answer> tag";
    candidate.in_answer = true;
    out->push_back(std::move(candidate));
  }
}

bool LooksLikePythonStart(absl::string_view line) {
  line = absl::StripLeadingAsciiWhitespace(line);
  for (absl::string_view prefix : {"import ", "from ", "class ", "def ", "@", "#", "\"\"\""}) {
    if (absl::StartsWith(line, prefix)) return true;
  }
  return false;
}

// Rule 4: the text itself, from its first line that looks like Python.
absl::StatusOr<ExtractedCode> WholeText(absl::string_view text) {
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  size_t first_nonblank = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (first_nonblank == lines.size() && !absl::StripAsciiWhitespace(lines[i]).empty()) {
      first_nonblank = i;
    }
    if (!LooksLikePythonStart(lines[i])) continue;
    ExtractedCode extracted;
    extracted.code = Tidy(std::vector<absl::string_view>(lines.begin() + i, lines.end()));
    extracted.how = i == first_nonblank ? "whole text" : absl::StrCat("text from line ", i + 1);
    return extracted;
  }
  return absl::InternalError("DefinesModelNew held, yet no line looks like Python");
}

}  // namespace

bool DefinesModelNew(absl::string_view code) {
  for (absl::string_view line : absl::StrSplit(code, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "class") || line.empty() || !absl::ascii_isspace(line[0])) {
      continue;
    }
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "ModelNew")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!line.empty() && (line[0] == '(' || line[0] == ':')) return true;
  }
  return false;
}

absl::StatusOr<ExtractedCode> ExtractCandidateCode(absl::string_view completion) {
  const std::string normalized = absl::StrReplaceAll(completion, {{"\r\n", "\n"}});
  const WithoutReasoning visible = StripReasoning(StripChatMarkup(normalized));

  std::vector<Candidate> candidates;
  int answer_tags = 0;
  for (const Segment& segment : SplitAnswerTags(visible.text)) {
    answer_tags += segment.in_answer;
    CollectCandidates(segment, &candidates);
  }
  const auto is_fence = [](const Candidate& c) { return c.kind != CandidateKind::kAnswerBody; };
  const int fences =
      static_cast<int>(std::count_if(candidates.begin(), candidates.end(), is_fence));
  int fence_number = 0;
  const Candidate* best = nullptr;
  int best_rank = 0;
  for (Candidate& c : candidates) {
    if (is_fence(c))
      c.how = absl::StrCat("fenced block ", ++fence_number, " of ", fences, " ", c.how);
    const int rank = Rank(c);
    if (rank > 0 && rank >= best_rank) {
      best = &c;
      best_rank = rank;
    }
  }
  if (best != nullptr) return ExtractedCode{best->code, best->how};
  if (DefinesModelNew(visible.text)) return WholeText(visible.text);

  std::string message = absl::StrCat(
      "no code found in the completion (",
      fences == 0 ? "no fenced block"
                  : absl::StrCat(fences, " fenced block(s), all empty or in another language"),
      answer_tags == 0 ? ", no <answer> tag" : ", nothing in the <answer> tag",
      ", no class ModelNew)");
  if (visible.dropped) absl::StrAppend(&message, "; text inside <think> is ignored");
  return absl::InvalidArgumentError(message);
}

}  // namespace kforge
