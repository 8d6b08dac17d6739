#include "learner/rewards/sequence_matcher.h"

#include <array>
#include <utility>
#include <vector>

namespace kforge {
namespace {

// difflib's autojunk constants: only a b at least this long loses its popular
// elements, those occurring more than 1 + len(b) / kPopularDivisor times.
constexpr size_t kAutojunkMinLength = 200;
constexpr size_t kPopularDivisor = 100;

struct Match {
  size_t i = 0;
  size_t j = 0;
  size_t size = 0;
};

// The state difflib keeps for one (a, b) pair: b2j (the positions of each
// byte in b, ascending, with popular bytes removed) and the two rows of the
// longest-match table.
class Matcher {
 public:
  Matcher(std::string_view a, std::string_view b)
      : a_(a), b_(b), row_(b.size() + 1, 0), next_row_(b.size() + 1, 0) {
    for (size_t j = 0; j < b.size(); ++j) b2j_[static_cast<unsigned char>(b[j])].push_back(j);
    if (b.size() >= kAutojunkMinLength) {
      const size_t max_count = b.size() / kPopularDivisor + 1;
      for (std::vector<size_t>& positions : b2j_) {
        if (positions.size() > max_count) positions.clear();
      }
    }
  }

  // get_matching_blocks without the sort and merge, which do not change the
  // total: the longest match of a range, then the same on each side of it.
  size_t MatchedElements() {
    size_t total = 0;
    std::vector<std::array<size_t, 4>> queue = {{0, a_.size(), 0, b_.size()}};
    while (!queue.empty()) {
      const auto [alo, ahi, blo, bhi] = queue.back();
      queue.pop_back();
      const Match m = FindLongestMatch(alo, ahi, blo, bhi);
      if (m.size == 0) continue;
      total += m.size;
      if (alo < m.i && blo < m.j) queue.push_back({alo, m.i, blo, m.j});
      if (m.i + m.size < ahi && m.j + m.size < bhi) {
        queue.push_back({m.i + m.size, ahi, m.j + m.size, bhi});
      }
    }
    return total;
  }

 private:
  // difflib's find_longest_match. row_[j + 1] is the length of the match
  // ending at a[i - 1], b[j] (difflib's j2len dict); only the entries listed
  // in touched_ are non-zero, so clearing a row costs what filling it did.
  Match FindLongestMatch(size_t alo, size_t ahi, size_t blo, size_t bhi) {
    Match best{alo, blo, 0};
    for (size_t i = alo; i < ahi; ++i) {
      for (size_t j : b2j_[static_cast<unsigned char>(a_[i])]) {
        if (j < blo) continue;
        if (j >= bhi) break;
        const size_t k = row_[j] + 1;
        next_row_[j + 1] = k;
        next_touched_.push_back(j + 1);
        // Strictly longer only: ties keep the match found first (smallest
        // i, then smallest j), as difflib does.
        if (k > best.size) best = {i + 1 - k, j + 1 - k, k};
      }
      ClearRow();
      std::swap(row_, next_row_);
      std::swap(touched_, next_touched_);
    }
    ClearRow();
    // Extend over equal neighbours. difflib also extends over junk here, but
    // without an isjunk function nothing is junk (popular is not junk).
    while (best.i > alo && best.j > blo && a_[best.i - 1] == b_[best.j - 1]) {
      --best.i;
      --best.j;
      ++best.size;
    }
    while (best.i + best.size < ahi && best.j + best.size < bhi &&
           a_[best.i + best.size] == b_[best.j + best.size]) {
      ++best.size;
    }
    return best;
  }

  void ClearRow() {
    for (size_t index : touched_) row_[index] = 0;
    touched_.clear();
  }

  std::string_view a_;
  std::string_view b_;
  std::array<std::vector<size_t>, 256> b2j_;
  std::vector<size_t> row_;
  std::vector<size_t> next_row_;
  std::vector<size_t> touched_;
  std::vector<size_t> next_touched_;
};

}  // namespace

size_t SequenceMatcherMatches(std::string_view a, std::string_view b) {
  return Matcher(a, b).MatchedElements();
}

double SequenceMatcherRatio(std::string_view a, std::string_view b) {
  const size_t length = a.size() + b.size();
  if (length == 0) return 1.0;
  return 2.0 * static_cast<double>(SequenceMatcherMatches(a, b)) / static_cast<double>(length);
}

}  // namespace kforge
