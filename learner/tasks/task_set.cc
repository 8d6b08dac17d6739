#include "learner/tasks/task_set.h"

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <google/protobuf/struct.pb.h>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using kforge::v1::Task;
using kforge::v1::TaskSetSpec;

// "19_ReLU" -> "ReLU"; names without a numeric prefix stay as they are.
std::string DisplayName(const std::string& stem) {
  const size_t underscore = stem.find('_');
  int number = 0;
  if (underscore != std::string::npos && absl::SimpleAtoi(stem.substr(0, underscore), &number)) {
    return stem.substr(underscore + 1);
  }
  return stem;
}

absl::StatusOr<std::vector<Task>> LoadKernelBenchDir(const std::string& root,
                                                     const std::string& solutions_dir) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(root, ": task folder does not exist"));
  }
  std::vector<Task> tasks;
  for (const fs::directory_entry& level_dir : fs::directory_iterator(root, ec)) {
    const std::string dir_name = level_dir.path().filename().string();
    int level = 0;
    if (!level_dir.is_directory() || !absl::StartsWith(dir_name, "level") ||
        !absl::SimpleAtoi(dir_name.substr(5), &level)) {
      continue;
    }
    for (const fs::directory_entry& file : fs::directory_iterator(level_dir.path(), ec)) {
      if (file.path().extension() != ".py") continue;
      const std::string stem = file.path().stem().string();
      KF_ASSIGN_OR_RETURN(std::string source, ReadFileToString(file.path().string()));
      Task task;
      task.set_id(absl::StrCat(dir_name, "/", stem));
      task.set_level(level);
      task.set_name(DisplayName(stem));
      task.set_reference_source(std::move(source));
      task.set_origin(file.path().string());
      const fs::path solution = fs::path(root) / solutions_dir / dir_name / (stem + ".py");
      if (fs::exists(solution, ec)) {
        KF_ASSIGN_OR_RETURN(std::string solution_text, ReadFileToString(solution.string()));
        task.set_reference_solution(std::move(solution_text));
      }
      tasks.push_back(std::move(task));
    }
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat(root, ": ", ec.message()));
  return tasks;
}

std::string StringField(const google::protobuf::Struct& object, const std::string& key) {
  auto it = object.fields().find(key);
  return it == object.fields().end() ? "" : it->second.string_value();
}

absl::StatusOr<std::vector<Task>> LoadKernelBookJsonl(const std::string& path) {
  KF_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  std::vector<Task> tasks;
  std::istringstream lines(text);
  std::string line;
  for (int line_number = 1; std::getline(lines, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    google::protobuf::Struct object;
    if (absl::Status parsed = ParseJsonMessage(line, &object); !parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": ", parsed.message()));
    }
    Task task;
    task.set_reference_source(StringField(object, "python_code"));
    if (task.reference_source().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": missing \"python_code\""));
    }
    task.set_reference_solution(StringField(object, "triton_code"));
    std::string name = StringField(object, "entry_point");
    if (name.empty()) name = StringField(object, "uuid");
    if (name.empty()) name = absl::StrCat("line", line_number);
    auto level_it = object.fields().find("level");
    task.set_level(level_it == object.fields().end()
                       ? 1
                       : static_cast<int>(level_it->second.number_value()));
    task.set_id(absl::StrCat("level", task.level(), "/", name));
    task.set_name(name);
    task.set_origin(absl::StrCat("jsonl:", path, ":", line_number));
    tasks.push_back(std::move(task));
  }
  return tasks;
}

bool MatchesAny(const google::protobuf::RepeatedPtrField<std::string>& globs,
                const std::string& id) {
  for (const std::string& glob : globs) {
    if (::fnmatch(glob.c_str(), id.c_str(), 0) == 0) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::vector<Task>> LoadTaskSet(const TaskSetSpec& spec,
                                              const std::string& builtin_root) {
  std::vector<Task> tasks;
  std::string where;
  // Unset: the annotated default ("solutions").
  const std::string solutions_dir = spec.has_solutions_dir() ? spec.solutions_dir() : "solutions";
  if (solutions_dir.empty() || absl::StrContains(solutions_dir, "/") ||
      absl::StrContains(solutions_dir, "..")) {
    return absl::InvalidArgumentError(
        absl::StrCat("tasks.solutions_dir: \"", solutions_dir, "\" is not a folder name"));
  }
  switch (spec.source_case()) {
    case TaskSetSpec::kKernelbenchDir: {
      where = spec.kernelbench_dir();
      KF_ASSIGN_OR_RETURN(tasks, LoadKernelBenchDir(where, solutions_dir));
      break;
    }
    case TaskSetSpec::kKernelbookJsonl: {
      where = spec.kernelbook_jsonl();
      KF_ASSIGN_OR_RETURN(tasks, LoadKernelBookJsonl(where));
      break;
    }
    case TaskSetSpec::kBuiltin: {
      if (spec.builtin().empty() || absl::StrContains(spec.builtin(), "/") ||
          absl::StrContains(spec.builtin(), "..")) {
        return absl::InvalidArgumentError(
            absl::StrCat("tasks.builtin: \"", spec.builtin(), "\" is not a built-in set name"));
      }
      where = (fs::path(builtin_root) / spec.builtin()).string();
      std::error_code ec;
      if (!fs::is_directory(where, ec)) {
        return absl::InvalidArgumentError(absl::StrCat("tasks.builtin: no built-in task set \"",
                                                       spec.builtin(), "\" in ", builtin_root));
      }
      KF_ASSIGN_OR_RETURN(tasks, LoadKernelBenchDir(where, solutions_dir));
      break;
    }
    case TaskSetSpec::SOURCE_NOT_SET:
      return absl::InvalidArgumentError(
          "tasks: set one of kernelbench_dir, kernelbook_jsonl or builtin");
  }
  std::erase_if(tasks, [&](const Task& task) {
    if (spec.levels_size() > 0 &&
        std::find(spec.levels().begin(), spec.levels().end(), task.level()) ==
            spec.levels().end()) {
      return true;
    }
    if (spec.include_size() > 0 && !MatchesAny(spec.include(), task.id())) return true;
    return MatchesAny(spec.exclude(), task.id());
  });
  if (tasks.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tasks: no task found in ", where, " after level and name filters"));
  }
  std::sort(tasks.begin(), tasks.end(),
            [](const Task& a, const Task& b) { return a.id() < b.id(); });
  return tasks;
}

}  // namespace kforge
