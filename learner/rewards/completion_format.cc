#include "learner/rewards/completion_format.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kAnswerOpen = "<answer>";
constexpr std::string_view kAnswerClose = "</answer>";
constexpr size_t kFenceLength = 3;  // ``` or ~~~

std::vector<size_t> FindAll(std::string_view text, std::string_view tag) {
  std::vector<size_t> found;
  for (size_t at = text.find(tag); at != std::string_view::npos; at = text.find(tag, at + 1)) {
    found.push_back(at);
  }
  return found;
}

// absl's Strip* take absl::string_view, which this Abseil does not alias to
// std::string_view.
std::string_view StripLeading(std::string_view text) {
  while (!text.empty() && absl::ascii_isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  return text;
}

std::string_view Strip(std::string_view text) {
  text = StripLeading(text);
  while (!text.empty() && absl::ascii_isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

bool IsBlank(std::string_view text) { return StripLeading(text).empty(); }

struct Think {
  bool well_formed = false;
  bool unclosed = false;  // the last think tag opens: the rest is all reasoning
  size_t end = 0;         // just past </think> when well-formed
  std::string problem;
};

Think AnalyzeThink(std::string_view text) {
  Think think;
  const std::vector<size_t> opens = FindAll(text, kThinkOpen);
  const std::vector<size_t> closes = FindAll(text, kThinkClose);
  if (!opens.empty() && (closes.empty() || opens.back() > closes.back())) {
    think.unclosed = true;
    think.problem = "unclosed <think>";
  } else if (opens.empty() && closes.empty()) {
    think.problem = "no <think> block";
  } else if (opens.size() != 1 || closes.size() != 1) {
    think.problem =
        absl::StrCat(opens.size(), " <think> and ", closes.size(), " </think> tags");
  } else if (!IsBlank(text.substr(0, opens[0]))) {
    think.problem = "text before <think>";
  } else if (IsBlank(text.substr(opens[0] + kThinkOpen.size(),
                                 closes[0] - opens[0] - kThinkOpen.size()))) {
    think.problem = "empty <think> block";
  } else {
    think.well_formed = true;
    think.end = closes[0] + kThinkClose.size();
  }
  return think;
}

struct Answer {
  bool well_formed = false;
  std::string_view body;
  std::string problem;
};

Answer AnalyzeAnswer(std::string_view text) {
  Answer answer;
  const std::vector<size_t> opens = FindAll(text, kAnswerOpen);
  const std::vector<size_t> closes = FindAll(text, kAnswerClose);
  if (opens.empty()) {
    answer.problem = "no <answer> block";
  } else if (opens.size() > 1) {
    answer.problem = absl::StrCat(opens.size(), " <answer> blocks");
  } else if (closes.empty() || closes.back() < opens[0]) {
    answer.problem = "unclosed <answer>";
  } else if (closes.size() > 1 || closes[0] < opens[0]) {
    answer.problem = absl::StrCat(closes.size(), " </answer> tags");
  } else {
    answer.well_formed = true;
    const size_t begin = opens[0] + kAnswerOpen.size();
    answer.body = text.substr(begin, closes[0] - begin);
  }
  return answer;
}

struct Fences {
  int closed = 0;
  bool unclosed = false;
  std::string other_language;  // the first block's tag when not Python
};

bool IsPythonTag(std::string_view tag) {
  return tag.empty() || tag == "python" || tag == "py" || tag == "python3";
}

Fences ScanFences(std::string_view text) {
  Fences fences;
  std::string_view open_fence;  // empty while outside a block
  size_t pos = 0;
  while (true) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line = StripLeading(text.substr(pos, eol - pos));
    const std::string_view fence = line.substr(0, kFenceLength);
    if (fence == "```" || fence == "~~~") {
      if (open_fence.empty()) {
        open_fence = fence;
        const std::string_view info = Strip(line.substr(kFenceLength));
        const std::string tag =
            absl::AsciiStrToLower(std::string(info.substr(0, info.find_first_of(" \t"))));
        if (!IsPythonTag(tag) && fences.other_language.empty()) fences.other_language = tag;
      } else if (fence == open_fence) {
        open_fence = {};
        ++fences.closed;
      }
    }
    if (eol == text.size()) break;
    pos = eol + 1;
  }
  fences.unclosed = !open_fence.empty();
  return fences;
}

// Empty when `fences` is exactly one closed Python (or untagged) block.
std::string CodeProblem(const Fences& fences) {
  if (fences.unclosed) return "unclosed fence";
  if (fences.closed == 0) return "no fenced block";
  if (fences.closed > 1) return absl::StrCat(fences.closed, " fenced blocks");
  if (!fences.other_language.empty()) {
    return absl::StrCat("fenced block tagged ", fences.other_language);
  }
  return "";
}

}  // namespace

CompletionFormat AnalyzeCompletionFormat(std::string_view completion, bool reasoning_tags) {
  CompletionFormat format;
  const Think think = AnalyzeThink(completion);
  format.has_think = think.well_formed;
  format.reasoning_end = think.well_formed ? think.end : 0;
  format.code_begin = format.reasoning_end;
  format.code_end = completion.size();

  const std::string_view rest = completion.substr(format.code_begin);
  const Answer answer = AnalyzeAnswer(rest);
  format.has_answer = answer.well_formed;
  const Fences fences = ScanFences(answer.well_formed ? answer.body : rest);
  format.code_blocks = fences.closed;
  const std::string code_problem = CodeProblem(fences);

  if (think.unclosed) {
    format.problem = think.problem;
  } else if (!reasoning_tags) {
    format.problem = code_problem;
    format.score = code_problem.empty() ? 1.0 : 0.0;
  } else if (!answer.well_formed) {
    format.problem = answer.problem;
  } else if (!code_problem.empty()) {
    format.problem = absl::StrCat(code_problem, " in the answer");
  } else {
    // The answer is right; the reasoning earns the other half.
    format.problem = think.problem;
    format.score = think.well_formed ? 1.0 : 0.5;
  }
  return format;
}

}  // namespace kforge
