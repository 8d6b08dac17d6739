// The folders a job may read and write, and the check that keeps a JobSpec's
// paths inside them. A path is resolved the way the kernel will resolve it
// when the learner opens it (made absolute, `..` and every symlink followed;
// a tail that does not exist yet is taken as written) and must land inside a
// root; the resolved path is what the job then records and uses, so a
// symlink swapped later cannot redirect it. Inside a folder the job reads
// (a model, a task set), a symlink must point inside the roots too.
// Nothing is opened before the check passes.
//
//   PathRoots models = PathRoots::Create({"/models"}, "model roots (--model_roots)");
//   KF_ASSIGN_OR_RETURN(std::string path, models.Confine("spec.model_path", spec.model_path()));
//   // PERMISSION_DENIED: spec.model_path: /tmp/x resolves to /tmp/x, outside the
//   //   learner's model roots (--model_roots): /models
#ifndef KFORGE_LEARNER_JOBS_PATH_ROOTS_H_
#define KFORGE_LEARNER_JOBS_PATH_ROOTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kforge {

class PathRoots {
 public:
  // `what` names the roots in errors ("model roots (--model_roots)").
  static PathRoots Create(const std::vector<std::string>& roots, std::string what);

  // The resolved `path` when inside a root. Relative paths are taken from
  // `base` (empty: the working directory). INVALID_ARGUMENT for an empty
  // path, PERMISSION_DENIED outside the roots; both name `field`.
  absl::StatusOr<std::string> Confine(absl::string_view field, const std::string& path,
                                      const std::string& base = "") const;

  // Every symlink under the folder `dir` (already confined) points inside
  // the roots; at most `max_entries` entries are looked at.
  absl::Status ConfineTree(absl::string_view field, const std::string& dir,
                           int max_entries = 200000) const;

  const std::vector<std::string>& roots() const { return roots_; }
  std::string Describe() const;  // "/models, /data/models"

 private:
  PathRoots(std::vector<std::string> roots, std::string what)
      : roots_(std::move(roots)), what_(std::move(what)) {}
  bool Inside(const std::string& resolved) const;

  std::vector<std::string> roots_;  // resolved
  std::string what_;
};

// The three kinds of root the learner keeps (LearnerConfig.model_roots,
// task_roots, output_roots).
struct JobPathRoots {
  PathRoots models;
  PathRoots tasks;
  PathRoots outputs;
  std::string state_dir;  // relative checkpoint.dir is taken from here
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_JOBS_PATH_ROOTS_H_
