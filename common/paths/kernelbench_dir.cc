#include "common/paths/kernelbench_dir.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace kforge {

namespace fs = std::filesystem;

namespace {

constexpr const char* kEnvVar = "KFORGE_KERNELBENCH_DIR";
// Where scripts/fetch-kernelbench.sh exports the repository, and where the
// problems sit inside it.
constexpr const char* kFetchedDir = "third_party/kernelbench/KernelBench";

bool HoldsProblems(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / "level1", ec);
}

}  // namespace

fs::path SourceCheckoutDir() { return fs::path(KFORGE_SOURCE_DIR); }

std::string KernelBenchHowTo() {
  return absl::StrCat("run scripts/fetch-kernelbench.sh (online) or set ", kEnvVar,
                      " to a copy of KernelBench's problems (the folder holding level1/)");
}

absl::StatusOr<KernelBenchDir> FindKernelBenchDir(const fs::path& checkout) {
  if (const char* env = std::getenv(kEnvVar); env != nullptr && *env != 0) {
    if (HoldsProblems(env)) return KernelBenchDir{.path = env, .found_by = kEnvVar};
    return absl::NotFoundError(absl::StrCat(kEnvVar, "=", env, " holds no level1/; ",
                                            KernelBenchHowTo()));
  }
  const fs::path fetched = checkout / kFetchedDir;
  if (HoldsProblems(fetched)) {
    return KernelBenchDir{.path = fetched.string(), .found_by = "fetched copy"};
  }
  const fs::path shared = checkout.parent_path() / "shared" / "kernelbench";
  if (HoldsProblems(shared)) {
    return KernelBenchDir{.path = shared.string(), .found_by = "../shared/kernelbench"};
  }
  return absl::NotFoundError(absl::StrCat("no KernelBench problems: ", kEnvVar, " is unset, and ",
                                          fetched.string(), " and ", shared.string(),
                                          " hold no level1/; ", KernelBenchHowTo()));
}

}  // namespace kforge
