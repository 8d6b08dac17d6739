#include "prompts/turn_feedback.h"

#include <algorithm>
#include <regex>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kforge {
namespace {

// What each stage checks, as the policy is told it.
std::string StageWords(v1::Stage stage) {
  switch (stage) {
    case v1::STAGE_STATIC: return "the static check (before anything ran)";
    case v1::STAGE_COMPILE: return "import and compile (building ModelNew and its kernels)";
    case v1::STAGE_TINY_RUN: return "the first run, on small inputs";
    case v1::STAGE_MULTI_INPUT: return "the correctness check on more inputs";
    case v1::STAGE_TIMING: return "timing";
    default: return "verification";
  }
}

std::string OutcomeWords(v1::StageOutcome outcome) {
  switch (outcome) {
    case v1::OUTCOME_TIMED_OUT: return "it ran past the time limit";
    case v1::OUTCOME_CRASHED: return "the process crashed";
    case v1::OUTCOME_INTERNAL_ERROR: return "the verifier could not finish (not your code's fault)";
    default: return "it failed";
  }
}

// Why a flagged candidate earned nothing, in a sentence each.
std::string FlagWords(v1::HackFlag flag) {
  switch (flag) {
    case v1::HACK_TORCH_FALLBACK:
    case v1::HACK_KERNELS_NOT_RUN:
      return "the output was computed by PyTorch operations, not by your Triton kernels";
    case v1::HACK_TRY_EXCEPT_FALLBACK:
      return "a try/except falls back to another computation around the kernel path";
    case v1::HACK_REFERENCE_REUSE: return "it calls or inherits the reference Model";
    case v1::HACK_INPUT_MUTATION: return "it changed its inputs";
    case v1::HACK_NONDETERMINISTIC: return "it gave different outputs for the same input";
    case v1::HACK_EXACT_SHAPE_ONLY: return "it is right only at the task's own shapes";
    case v1::HACK_RESULT_CACHING: return "it was fast only on inputs it had seen before";
    case v1::HACK_SPEEDUP_IMPLAUSIBLE: return "its measured speedup is not plausible";
    case v1::HACK_CONCURRENCY:
    case v1::HACK_SIDE_STREAM: return "it does work outside the timed stream";
    default: return "it uses a construct the verifier does not allow";
  }
}

// Flags raised by the timing stage's integrity checks.
bool IsTimingCheck(v1::HackFlag flag) {
  switch (flag) {
    case v1::HACK_RESULT_CACHING:
    case v1::HACK_SPEEDUP_IMPLAUSIBLE:
    case v1::HACK_SIDE_STREAM:
    case v1::HACK_CONCURRENCY:
      return true;
    default:
      return false;
  }
}

constexpr char kCut[] = "[...]\n";
constexpr size_t kCutSize = sizeof(kCut) - 1;

// The end of `text` within `budget` bytes, the cut's mark included, cut at
// a line start when one is near.
std::string Tail(const std::string& text, size_t budget) {
  if (text.size() <= budget) return text;
  if (budget <= kCutSize) return std::string(kCut, budget);
  budget -= kCutSize;
  size_t from = text.size() - budget;
  const size_t line = text.find('\n', from);
  if (line != std::string::npos && line - from < budget / 4) from = line + 1;
  // Not inside a UTF-8 character.
  while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) ++from;
  return absl::StrCat(kCut, text.substr(from));
}

// Scrubbed, then cut to `budget`. Only the message's end is scrubbed: a
// candidate's own error text can be megabytes, and std::regex is slow (and
// recursive) on long runs.
std::string ScrubbedTail(const std::string& message, size_t budget) {
  return Tail(ScrubVerifierMessage(Tail(message, 4 * budget + 256)), budget);
}

// Room left for text after `lines` (joined by newlines) within `max_chars`.
size_t Room(const std::vector<std::string>& lines, size_t max_chars) {
  size_t used = 0;
  for (const std::string& line : lines) used += line.size() + 1;
  return max_chars > used ? max_chars - used : 0;
}

}  // namespace

std::string ScrubVerifierMessage(std::string_view message) {
  // ECMAScript grammar; icase only where the words vary in case.
  static const auto* const kRules = new std::vector<std::pair<std::regex, std::string>>{
      // The first mismatch's values: "candidate 1.5, reference 0.25". The
      // candidate's value goes too, or it and the max abs error beside it
      // would give the reference's away (candidate +- error).
      {std::regex(R"((candidate(?: is| has)?) [-+]?(?:[0-9][0-9.eE+-]*|nan|inf|True|False))",
                  std::regex::icase),
       "$1 <hidden>"},
      // "reference 0.25", "the reference is nan", "reference has inf".
      {std::regex(R"((reference(?: is| has)?) [-+]?(?:[0-9][0-9.eE+-]*|nan|inf|True|False))",
                  std::regex::icase),
       "$1 <hidden>"},
      // "expected 0.25" as Python's assertion messages say it.
      {std::regex(R"((expected:?) [-+]?(?:[0-9][0-9.eE+-]*|nan|inf))", std::regex::icase),
       "$1 <hidden>"},
      // "normal_seed_7", "seed=1234", "seeds: 99".
      {std::regex(R"((seeds?)([ _=:]*)[0-9]+)", std::regex::icase), "$1$2<hidden>"},
      // /tmp/kforge-sandbox-1/candidate.py -> candidate.py
      // (Only a path that starts a word: torch/nn/functional.py stays.)
      {std::regex(R"((^|[\s"'(=,:])(?:/+[A-Za-z0-9._+@~-]+)+/([A-Za-z0-9._+@~-]+))"), "$1$2"},
      // Epoch ids, tickets, hashes.
      {std::regex(R"(\b[0-9a-fA-F]{16,}\b)"), "<id>"},
  };
  std::string text(message);
  for (const auto& [pattern, replacement] : *kRules) {
    text = std::regex_replace(text, pattern, replacement);
  }
  return text;
}

std::string RenderTurnFeedback(const v1::Verdict& verdict, size_t max_chars) {
  std::vector<std::string> lines;
  if (verdict.hack_flags_size() > 0) {
    std::vector<std::string> why;
    for (int flag : verdict.hack_flags()) why.push_back(FlagWords(static_cast<v1::HackFlag>(flag)));
    lines.push_back(absl::StrCat("Your answer earned no credit: ", absl::StrJoin(why, "; "), "."));
    // The verifier adds a detail with each flag (hack_details[i] is
    // hack_flags[i]'s). Details that name what to fix (the PyTorch ops that
    // ran, the set it failed on) are shown; those of the timing checks are
    // not: they are the measurements and bounds a policy would learn to
    // stay under, not something an honest kernel needs to change.
    for (int i = 0; i < verdict.hack_details_size(); ++i) {
      const auto flag = static_cast<v1::HackFlag>(
          i < verdict.hack_flags_size() ? verdict.hack_flags(i) : v1::HACK_UNSPECIFIED);
      if (IsTimingCheck(flag)) continue;
      const size_t room = Room(lines, max_chars);
      if (room < 16) break;
      lines.push_back(ScrubbedTail(verdict.hack_details(i), room));
    }
  } else if (verdict.correct()) {
    lines.push_back("Your ModelNew passed every correctness check.");
    if (verdict.speedup_vs_eager() > 0) {
      std::string timed = absl::StrFormat("Measured: %.4g ms per call; PyTorch eager %.4g ms (%.2fx)",
                                          verdict.candidate_timing().mean_ms(),
                                          verdict.eager_timing().mean_ms(), verdict.speedup_vs_eager());
      if (verdict.speedup_vs_compile() > 0) {
        absl::StrAppendFormat(&timed, ", torch.compile %.4g ms (%.2fx)",
                              verdict.compile_timing().mean_ms(), verdict.speedup_vs_compile());
      }
      lines.push_back(absl::StrCat(timed, "."));
      lines.push_back(verdict.speedup_vs_eager() < 1
                          ? "It is slower than PyTorch: make it faster and keep it correct."
                          : "Make it faster if you can, and keep it correct.");
    }
    // Correct, but its timing did not finish (a timeout, a crash, a timed
    // call that failed): say so rather than nothing.
    const v1::StageResult* last =
        verdict.stages_size() > 0 ? &verdict.stages(verdict.stages_size() - 1) : nullptr;
    if (last != nullptr && last->outcome() != v1::OUTCOME_PASSED) {
      lines.push_back(absl::StrCat("But ", StageWords(last->stage()), " did not finish: ",
                                   OutcomeWords(last->outcome()), "."));
      const size_t room = Room(lines, max_chars);
      if (!last->message().empty() && room >= 16) lines.push_back(ScrubbedTail(last->message(), room));
    }
  } else if (verdict.stages_size() == 0) {
    lines.push_back("Your answer could not be verified.");
  } else {
    const v1::StageResult& last = verdict.stages(verdict.stages_size() - 1);
    lines.push_back(absl::StrCat("Your answer did not pass ", StageWords(last.stage()), ": ",
                                 OutcomeWords(last.outcome()), "."));
    const size_t room = std::max<size_t>(Room(lines, max_chars), 16);
    if (!last.message().empty()) lines.push_back(ScrubbedTail(last.message(), room));
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace kforge
