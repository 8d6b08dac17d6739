// Where the KernelBench problems are (a folder holding level1/, level2/,
// ...). They are someone else's code and never in kforge's tree; tests,
// benchmarks and `kforge eval` look for them in one order:
//   1. $KFORGE_KERNELBENCH_DIR: when set, the only place looked at (a copy
//      named on purpose is never silently replaced by another);
//   2. third_party/kernelbench/KernelBench in the checkout, what
//      scripts/fetch-kernelbench.sh fetches (setup does when online);
//   3. ../shared/kernelbench beside the checkout (this project's CI).
// scripts/kernelbench-dir.sh is the same lookup for scripts.
//
//   absl::StatusOr<KernelBenchDir> kb = FindKernelBenchDir();
//   if (!kb.ok()) { /* kb.status() says what was looked at and how to get them */ }
//   LoadTasks(kb->path + "/level1");
#ifndef KFORGE_COMMON_PATHS_KERNELBENCH_DIR_H_
#define KFORGE_COMMON_PATHS_KERNELBENCH_DIR_H_

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace kforge {

struct KernelBenchDir {
  std::string path;
  // Which of the three places it is: "KFORGE_KERNELBENCH_DIR",
  // "fetched copy" or "../shared/kernelbench".
  std::string found_by;
};

// The checkout this binary was built from (CMake's source folder).
std::filesystem::path SourceCheckoutDir();

// The first of the three places above that holds level1/, for the checkout
// `checkout`. NOT_FOUND names every place looked at and how to get the
// problems (KernelBenchHowTo).
absl::StatusOr<KernelBenchDir> FindKernelBenchDir(
    const std::filesystem::path& checkout = SourceCheckoutDir());

// One sentence: how to get the problems.
std::string KernelBenchHowTo();

}  // namespace kforge

#endif  // KFORGE_COMMON_PATHS_KERNELBENCH_DIR_H_
