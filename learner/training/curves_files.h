// A job's curves on disk: <job_dir>/curves.svg from its TrainerState
// (eval/training_curves.h), and curves.png beside it where Debian's
// rsvg-convert (librsvg2-bin) is installed, so the picture opens anywhere;
// without it the PNG is skipped and the result says why. curves.json holds
// the figures behind them: the TrainerState's histories (protobuf's JSON
// mapping, proto field names) without its resume-only parts (curriculum,
// random state), for scripts such as bench/stage_times.py.
//
//   CurvesFiles files = WriteCurvesFiles(job_dir, state, {.title = "job-000001"});
//   if (!files.svg_status.ok()) log.Warning(...);
//   if (!files.png_note.empty()) log.Info(files.png_note);
#ifndef KFORGE_LEARNER_TRAINING_CURVES_FILES_H_
#define KFORGE_LEARNER_TRAINING_CURVES_FILES_H_

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "eval/training_curves.h"
#include "kforge/v1/learner_state.pb.h"

namespace kforge {

struct CurvesFiles {
  std::filesystem::path svg;  // <job_dir>/curves.svg
  std::filesystem::path png;  // <job_dir>/curves.png; empty when not written
  std::filesystem::path json;  // <job_dir>/curves.json
  absl::Status svg_status;
  absl::Status json_status;
  // Why there is no PNG ("rsvg-convert is not installed ..."), or how
  // rendering it failed; empty when it was written.
  std::string png_note;
};

// Writes both atomically (readers never see half a file); `png_timeout`
// bounds rsvg-convert. Failures are reported, never fatal: the curves are
// for people, the job does not depend on them.
CurvesFiles WriteCurvesFiles(const std::filesystem::path& job_dir, const v1::TrainerState& state,
                             const TrainingCurvesOptions& options,
                             absl::Duration png_timeout = absl::Seconds(30));

// The first executable `name` on PATH; empty when there is none.
std::filesystem::path FindOnPath(const std::string& name);

}  // namespace kforge

#endif  // KFORGE_LEARNER_TRAINING_CURVES_FILES_H_
