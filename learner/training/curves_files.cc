#include "learner/training/curves_files.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/config/json_config.h"
#include "common/process/child_process.h"

namespace kforge {

namespace fs = std::filesystem;

fs::path FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return {};
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const fs::path candidate = fs::path(std::string(dir)) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

namespace {

// svg -> png with rsvg-convert; "" when written, else why not.
std::string RenderPng(const fs::path& svg, const fs::path& png, absl::Duration timeout) {
  const fs::path converter = FindOnPath("rsvg-convert");
  if (converter.empty()) {
    return "curves.png skipped: rsvg-convert is not installed (Debian: librsvg2-bin)";
  }
  const fs::path tmp = fs::path(png.string() + ".tmp");
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(
      {.argv = {converter.string(), "--format=png", "--output", tmp.string(), svg.string()},
       .capture_output = true});
  if (!child.ok()) return absl::StrCat("curves.png: ", child.status().message());
  absl::StatusOr<ExitInfo> exit = (*child)->WaitFor(timeout);
  if (!exit.ok()) {
    (*child)->Terminate(absl::Seconds(1));
    return absl::StrCat("curves.png: rsvg-convert took over ", absl::FormatDuration(timeout));
  }
  std::error_code ec;
  if (!exit->exited || exit->code != 0) {
    fs::remove(tmp, ec);
    return absl::StrCat("curves.png: rsvg-convert ", exit->Describe(), ": ", (*child)->output());
  }
  fs::rename(tmp, png, ec);
  return ec ? absl::StrCat("curves.png: ", ec.message()) : "";
}

}  // namespace

CurvesFiles WriteCurvesFiles(const fs::path& job_dir, const v1::TrainerState& state,
                             const TrainingCurvesOptions& options, absl::Duration png_timeout) {
  CurvesFiles files{.svg = job_dir / "curves.svg", .json = job_dir / "curves.json"};
  std::error_code ec;
  fs::create_directories(job_dir, ec);  // before the first checkpoint it may not exist
  v1::TrainerState figures = state;
  figures.clear_curriculum();
  figures.clear_rng_state();
  files.json_status = WriteFileAtomically(files.json.string(), ToJson(figures));
  files.svg_status = WriteFileAtomically(files.svg.string(), TrainingCurvesSvg(state, options));
  if (!files.svg_status.ok()) return files;
  files.png_note = RenderPng(files.svg, job_dir / "curves.png", png_timeout);
  if (files.png_note.empty()) files.png = job_dir / "curves.png";
  return files;
}

}  // namespace kforge
