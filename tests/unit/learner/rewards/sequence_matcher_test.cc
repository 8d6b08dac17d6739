// SequenceMatcherRatio is difflib.SequenceMatcher(None, a, b).ratio(): a few
// hand-checked cases, then hundreds of pairs (random strings over small
// alphabets, long ones that trigger autojunk, code with edits) compared with
// the Python interpreter's difflib at test time.
#include "learner/rewards/sequence_matcher.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/process/child_process.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using Pair = std::pair<std::string, std::string>;

TEST(SequenceMatcherTest, EmptyStringsAreIdentical) {
  EXPECT_EQ(SequenceMatcherRatio("", ""), 1.0);
  EXPECT_EQ(SequenceMatcherRatio("abc", ""), 0.0);
  EXPECT_EQ(SequenceMatcherRatio("", "abc"), 0.0);
}

TEST(SequenceMatcherTest, MatchesDifflibOnHandCheckedPairs) {
  EXPECT_EQ(SequenceMatcherMatches("abcd", "bcde"), 3u);
  EXPECT_EQ(SequenceMatcherRatio("abcd", "bcde"), 0.75);
  EXPECT_EQ(SequenceMatcherMatches("qabxcd", "abycdf"), 4u);
  EXPECT_DOUBLE_EQ(SequenceMatcherRatio("qabxcd", "abycdf"), 2.0 * 4 / 12);
  EXPECT_EQ(SequenceMatcherRatio("same text", "same text"), 1.0);
}

TEST(SequenceMatcherTest, AutojunkDropsPopularCharactersOfLongSequences) {
  const std::string as(300, 'a');
  // 'a' is popular in b (300 > 1 + 301 / 100), so no match can start on it;
  // without autojunk the ratio would be 600 / 601.
  EXPECT_EQ(SequenceMatcherMatches(as, "b" + as), 0u);
  EXPECT_EQ(SequenceMatcherRatio(as, "b" + as), 0.0);
  // A match that starts at the range's beginning still extends over popular
  // characters, as in difflib.
  EXPECT_EQ(SequenceMatcherRatio(as, as), 1.0);
  // Only the rare characters match: 2 * 3 / 606 in difflib.
  EXPECT_EQ(SequenceMatcherMatches("xyz" + as, as + "xyz"), 3u);
  // Below 200 elements nothing is popular.
  const std::string short_as(150, 'a');
  EXPECT_EQ(SequenceMatcherMatches(short_as, "b" + short_as), 150u);
}

TEST(SequenceMatcherTest, IsNotSymmetric) {
  // Autojunk looks at b only: 'a' is popular in the 300-long string, not in
  // the 101-long one.
  const std::string as(300, 'a');
  const std::string short_as = "b" + std::string(100, 'a');
  EXPECT_EQ(SequenceMatcherMatches(short_as, as), 0u);
  EXPECT_EQ(SequenceMatcherMatches(as, short_as), 100u);
}

// ---- Comparison with Python's difflib ----

std::string RandomString(std::mt19937_64& rng, std::string_view alphabet, size_t length) {
  std::string s(length, ' ');
  for (char& c : s) c = alphabet[rng() % alphabet.size()];
  return s;
}

constexpr char kCode[] = R"(import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        grid = (triton.cdiv(n, 1024),)
        relu_kernel[grid](x, out, n, BLOCK=1024)
        return out
)";

// `edits` random single-character inserts, deletes and replacements, and
// line deletions and duplications.
std::string Edit(std::mt19937_64& rng, std::string text, int edits) {
  const std::string_view alphabet = "abcdefghijklmnopqrstuvwxyz_()[]:=+*,. \n0123456789";
  for (int e = 0; e < edits && !text.empty(); ++e) {
    const size_t at = rng() % text.size();
    switch (rng() % 5) {
      case 0: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
      case 1: text.erase(at, 1); break;
      case 2: text[at] = alphabet[rng() % alphabet.size()]; break;
      case 3: {
        const size_t begin = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at);
        const size_t end = std::min(text.find('\n', at + 1), text.size());
        text.erase(begin, end - begin);
        break;
      }
      default: {
        const size_t begin = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at);
        const size_t end = std::min(text.find('\n', at + 1), text.size());
        text.insert(end, text.substr(begin, end - begin));
      }
    }
  }
  return text;
}

std::vector<Pair> ComparisonPairs() {
  std::mt19937_64 rng(20240611);
  std::vector<Pair> pairs = {{"", ""}, {"", "x"}, {"x", ""}, {"a", "a"}, {kCode, kCode}};
  const std::vector<std::string_view> alphabets = {"ab", "abc", "acgt", "abcdefghij",
                                                   "abcdefghijklmnopqrstuvwxyz \n"};
  const std::vector<size_t> lengths = {0, 1, 5, 20, 80, 199, 200, 201, 350, 700};
  for (int round = 0; round < 4; ++round) {
    for (std::string_view alphabet : alphabets) {
      for (size_t length : lengths) {
        const size_t other = lengths[rng() % lengths.size()];
        pairs.emplace_back(RandomString(rng, alphabet, length), RandomString(rng, alphabet, other));
      }
    }
  }
  for (int i = 0; i < 60; ++i) {
    const int edits = 1 + static_cast<int>(rng() % 40);
    pairs.emplace_back(Edit(rng, kCode, edits), i % 2 ? std::string(kCode) : Edit(rng, kCode, 5));
  }
  for (int i = 0; i < 20; ++i) {  // one string a mutation of the other, over a tiny alphabet
    const std::string base = RandomString(rng, "ab \n", 200 + rng() % 400);
    pairs.emplace_back(base, Edit(rng, base, 1 + static_cast<int>(rng() % 20)));
  }
  return pairs;
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, c));
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

// /usr/bin/python3, else python3 on PATH; empty when neither exists.
std::string FindPython() {
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path == nullptr ? "" : path, ':')) {
    const std::string candidate = absl::StrCat(dir, "/python3");
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

constexpr char kDifflibScript[] = R"(
import difflib, json, sys
for a, b in json.load(open(sys.argv[1])):
    m = difflib.SequenceMatcher(None, a, b)
    print(sum(block.size for block in m.get_matching_blocks()), repr(m.ratio()))
)";

TEST(SequenceMatcherTest, AgreesWithPythonDifflib) {
  const std::string python = FindPython();
  if (python.empty()) GTEST_SKIP() << "no python3 (/usr/bin/python3 or on PATH) to run difflib";
  const std::vector<Pair> pairs = ComparisonPairs();
  ASSERT_GE(pairs.size(), 200u);
  testing::TempDir dir;
  {
    std::ofstream json(dir.Sub("pairs.json"));
    json << "[";
    for (size_t i = 0; i < pairs.size(); ++i) {
      json << (i ? ",\n" : "") << "[" << JsonString(pairs[i].first) << ", "
           << JsonString(pairs[i].second) << "]";
    }
    json << "]\n";
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(
      {.argv = {python, "-c", kDifflibScript, dir.Sub("pairs.json")}, .capture_output = true});
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<ExitInfo> exit = (*child)->WaitFor(absl::Seconds(120));
  ASSERT_TRUE(exit.ok()) << exit.status();
  ASSERT_TRUE(exit->exited && exit->code == 0) << exit->Describe() << "\n" << (*child)->output();

  const std::vector<std::string> lines =
      absl::StrSplit((*child)->output(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), pairs.size()) << (*child)->output();
  for (size_t i = 0; i < pairs.size(); ++i) {
    const std::vector<std::string> fields = absl::StrSplit(lines[i], ' ');
    ASSERT_EQ(fields.size(), 2u) << lines[i];
    const auto& [a, b] = pairs[i];
    EXPECT_EQ(SequenceMatcherMatches(a, b), std::stoul(fields[0]))
        << "pair " << i << " (lengths " << a.size() << ", " << b.size() << ")";
    EXPECT_NEAR(SequenceMatcherRatio(a, b), std::strtod(fields[1].c_str(), nullptr), 1e-12)
        << "pair " << i;
  }
}

}  // namespace
}  // namespace kforge
