// SequenceMatcherRatio: a port of Python's
// `difflib.SequenceMatcher(None, a, b).ratio()` over bytes, used for the
// similarity reward term (how close a candidate is to a task's reference
// solution). It reproduces difflib exactly, not approximately, so rewards
// agree with the Python tooling people use to inspect runs:
//
//   - the "autojunk" heuristic: when b has 200 or more elements, every byte
//     occurring more than 1 + len(b) / 100 times in b is "popular" and never
//     starts a match (it can still extend one, as in difflib);
//   - find_longest_match's tie-breaking: the longest match that starts
//     earliest in a, then earliest in b, extended by equal neighbours;
//   - get_matching_blocks' recursion on both sides of each match.
//
// The ratio is 2 * M / T, where M is the number of matched elements and T is
// len(a) + len(b); 1.0 when both are empty. It is not symmetric (autojunk and
// the tie-breaking look at b only). Elements are bytes: on non-ASCII text the
// result equals difflib's on the byte strings (`a.encode()`), not on code
// points.
//
// Cost: O(len(a) * len(b)) time in the worst case (inputs here are a few KB),
// O(len(b)) memory.
//
//   double similarity = SequenceMatcherRatio(candidate_code, task.reference_solution());
#ifndef KFORGE_LEARNER_REWARDS_SEQUENCE_MATCHER_H_
#define KFORGE_LEARNER_REWARDS_SEQUENCE_MATCHER_H_

#include <cstddef>
#include <string_view>

namespace kforge {

// Sum of the sizes of difflib's matching blocks of `a` and `b` (the M of the
// ratio).
size_t SequenceMatcherMatches(std::string_view a, std::string_view b);

// difflib.SequenceMatcher(None, a, b).ratio(), in [0, 1].
double SequenceMatcherRatio(std::string_view a, std::string_view b);

}  // namespace kforge

#endif  // KFORGE_LEARNER_REWARDS_SEQUENCE_MATCHER_H_
