#include "verifier_worker/python/python_interpreter.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <google/protobuf/struct.pb.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/config/json_config.h"
#include "common/process/child_process.h"

namespace kforge {
namespace {

constexpr absl::string_view kMarker = "KFORGE_PYTHON_PROBE ";

// Runs inside the probed interpreter; prints one marked JSON line.
constexpr const char* kProbeScript = R"py(
import json, sys
info = {"python": sys.version.split()[0]}
import torch
info["torch"] = torch.__version__
info["cuda"] = bool(torch.cuda.is_available())
try:
    import triton
    info["triton"] = triton.__version__
except Exception:
    info["triton"] = ""
print("KFORGE_PYTHON_PROBE " + json.dumps(info), flush=True)
)py";

// The last non-empty line of the output: for a Python traceback, the error.
std::string LastLine(const std::string& output) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) last = std::string(line);
  }
  return last.empty() ? "no output" : last;
}

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    const std::filesystem::path candidate = std::filesystem::path(std::string(dir)) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

}  // namespace

absl::StatusOr<PythonInfo> ProbePython(const std::string& path, absl::Duration timeout) {
  auto child = ChildProcess::Spawn({.argv = {path, "-c", kProbeScript}, .capture_output = true});
  if (!child.ok()) return child.status();
  absl::StatusOr<ExitInfo> exit = (*child)->WaitFor(timeout);
  if (!exit.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": did not answer within ", absl::FormatDuration(timeout)));
  }
  const std::string& output = (*child)->output();
  if (!exit->exited || exit->code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": ", exit->Describe(), ": ", LastLine(output)));
  }
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::ConsumePrefix(&line, kMarker)) continue;
    google::protobuf::Struct object;
    if (!ParseJsonMessage(line, &object).ok()) break;
    const auto& f = object.fields();
    PythonInfo info;
    info.path = path;
    info.python_version = f.count("python") ? f.at("python").string_value() : "";
    info.torch_version = f.count("torch") ? f.at("torch").string_value() : "";
    info.triton_version = f.count("triton") ? f.at("triton").string_value() : "";
    info.cuda_available = f.count("cuda") && f.at("cuda").bool_value();
    return info;
  }
  return absl::FailedPreconditionError(
      absl::StrCat(path, ": probe printed no result: ", LastLine(output)));
}

absl::StatusOr<PythonInfo> FindPythonWithTorch(const std::string& configured,
                                               absl::Duration timeout) {
  std::vector<std::string> candidates;
  if (!configured.empty()) {
    candidates.push_back(configured);
  } else {
    candidates.push_back("/usr/bin/python3");
    if (std::string on_path = FindOnPath("python3"); !on_path.empty() && on_path != "/usr/bin/python3") {
      candidates.push_back(on_path);
    }
  }
  std::vector<std::string> failures;
  for (const std::string& candidate : candidates) {
    if (::access(candidate.c_str(), X_OK) != 0) {
      failures.push_back(absl::StrCat(candidate, ": not an executable file"));
      continue;
    }
    absl::StatusOr<PythonInfo> info = ProbePython(candidate, timeout);
    if (info.ok()) return info;
    failures.push_back(std::string(info.status().message()));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no Python interpreter that imports torch: ", absl::StrJoin(failures, "; "),
      ". Set the verifier's `python` config field (or --python) to one that does, for example "
      "Debian's /usr/bin/python3 with python3-torch installed"));
}

}  // namespace kforge
