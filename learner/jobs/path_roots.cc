#include "learner/jobs/path_roots.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// Absolute, with `..` and symlinks resolved as far as the path exists.
std::string Resolve(const std::string& path, const std::string& base) {
  fs::path p(path);
  if (p.is_relative()) p = (base.empty() ? fs::current_path() : fs::path(base)) / p;
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(p, ec);
  if (ec) resolved = p.lexically_normal();
  std::string out = resolved.string();
  // "/models/" and "/models" are the same folder.
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

PathRoots PathRoots::Create(const std::vector<std::string>& roots, std::string what) {
  std::vector<std::string> resolved;
  for (const std::string& root : roots) {
    if (!root.empty()) resolved.push_back(Resolve(root, ""));
  }
  return PathRoots(std::move(resolved), std::move(what));
}

bool PathRoots::Inside(const std::string& resolved) const {
  for (const std::string& root : roots_) {
    if (resolved == root) return true;
    if (root == "/" || absl::StartsWith(resolved, absl::StrCat(root, "/"))) return true;
  }
  return false;
}

std::string PathRoots::Describe() const {
  return roots_.empty() ? "(none)" : absl::StrJoin(roots_, ", ");
}

absl::StatusOr<std::string> PathRoots::Confine(absl::string_view field, const std::string& path,
                                               const std::string& base) const {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": is empty"));
  if (path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": holds a NUL character"));
  }
  const std::string resolved = Resolve(path, base);
  if (!Inside(resolved)) {
    return absl::PermissionDeniedError(
        absl::StrCat(field, ": ", path, resolved == path ? "" : absl::StrCat(" resolves to ", resolved),
                     ", outside the learner's ", what_, ": ", Describe()));
  }
  return resolved;
}

absl::Status PathRoots::ConfineTree(absl::string_view field, const std::string& dir,
                                    int max_entries) const {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return absl::OkStatus();  // the folder checks say what is wrong
  int seen = 0;
  // Symlinks are not followed while walking: each is checked, not entered.
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    if (++seen > max_entries) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", dir, " holds more than ",
                                                     max_entries, " entries"));
    }
    if (!it->is_symlink(ec)) continue;
    // The link's own target, resolved further: a dangling link is judged by
    // where it points, not by the name it sits under.
    fs::path link_target = fs::read_symlink(it->path(), ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat(field, ": cannot read the symlink ",
                                                            it->path().string()));
    if (link_target.is_relative()) link_target = it->path().parent_path() / link_target;
    const std::string target = Resolve(link_target.string(), "");
    if (!Inside(target)) {
      return absl::PermissionDeniedError(absl::StrCat(
          field, ": ", it->path().lexically_relative(dir).string(), " in ", dir,
          " is a symlink to ", target, ", outside the learner's ", what_, ": ", Describe()));
    }
  }
  return absl::OkStatus();
}

}  // namespace kforge
