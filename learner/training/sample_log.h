// <job dir>/samples.jsonl: each sampled step's samples as JSON lines (the
// step, task, group, index, policy version, reward and its parts, stage
// reached, outcome, the verdict's message, the completion), so a person
// can read why candidates fail where the figures only say how many do.
//
//   if (absl::Status s = AppendSampleLog(job_dir / "samples.jsonl", step, groups,
//                                        spec.sample_log());
//       !s.ok()) log.Warning(...);
//
// Appended to: a resumed job adds after its earlier run's lines, which carry
// their step. A failure to write is the caller's warning, never fatal.
#ifndef KFORGE_LEARNER_TRAINING_SAMPLE_LOG_H_
#define KFORGE_LEARNER_TRAINING_SAMPLE_LOG_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kforge/v1/job.pb.h"
#include "learner/training/step_batches.h"

namespace kforge {

// One line (no newline) for sample `index` of `group`, trained in `step`;
// texts keep their first `max_chars` bytes (backed off to a UTF-8
// character's start) and say how many were cut.
std::string SampleLogLine(int64_t step, const ScoredGroup& group, size_t index, int32_t max_chars);

// Appends spec.per_step() samples of `groups` (whole groups first, in order).
absl::Status AppendSampleLog(const std::filesystem::path& file, int64_t step,
                             const std::vector<ScoredGroup>& groups, const v1::SampleLogSpec& spec);

}  // namespace kforge

#endif  // KFORGE_LEARNER_TRAINING_SAMPLE_LOG_H_
