// What the policy reads about its last attempt before it tries again
// (multi-turn refinement, issue 24): the stage that failed and why, the
// mismatch summary, or, once correct, its measured time against the
// baselines. Rendered for a model to read, and kept to what a user of the
// verifier would be told: the verifier's secrets stay out.
//
//   std::string feedback = RenderTurnFeedback(verdict, /*max_chars=*/1500);
//
// SECRETS. Verifier messages name things a policy must not learn to read:
// reference output values ("candidate 1.5, reference 0.25"), the secret
// seeds of the input sets ("normal_seed_7", "seed 1234"), the sandbox's
// paths and the verifier's ids. ScrubVerifierMessage hides the values (the
// candidate's at the first mismatch too: with the max abs error beside it,
// it would give the reference's away) and the seeds, cuts paths to their
// last part (a traceback still names candidate.py and its line) and hides
// long hex ids. What stays: the stage, the error, the input set's kind,
// shapes, mismatch counts, max abs and rel l2 error, and the tolerance (the
// job's spec, which its owner sets and sees).
#ifndef KFORGE_PROMPTS_TURN_FEEDBACK_H_
#define KFORGE_PROMPTS_TURN_FEEDBACK_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "kforge/v1/verdict.pb.h"

namespace kforge {

// A few sentences about `verdict`, at most `max_chars` bytes once past the
// opening sentence: an over-long error keeps its end (a traceback's last
// lines say what broke).
std::string RenderTurnFeedback(const v1::Verdict& verdict, size_t max_chars);

// `message` with reference values, seeds, paths and ids hidden (see above).
std::string ScrubVerifierMessage(std::string_view message);

}  // namespace kforge

#endif  // KFORGE_PROMPTS_TURN_FEEDBACK_H_
