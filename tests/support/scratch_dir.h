// A fresh temporary folder, removed with POSIX calls on scope exit, for tests
// that link LibTorch. Not temp_dir.h's TempDir: in a process that links
// PyTorch's LibTorch 2.x (seen with 2.11), std::filesystem::remove_all binds
// to an incompatible copy inside libtorch_cpu.so and crashes.
#ifndef KFORGE_TESTS_SUPPORT_SCRATCH_DIR_H_
#define KFORGE_TESTS_SUPPORT_SCRATCH_DIR_H_

#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>

namespace kforge::testing {

class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                          "/kforge-scratch-XXXXXX";
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    if (!path_.empty()) ::nftw(path_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& relative) const { return path_ + "/" + relative; }

 private:
  static int RemoveEntry(const char* entry, const struct stat*, int, struct FTW*) {
    return std::remove(entry);
  }
  std::string path_;
};

}  // namespace kforge::testing

#endif  // KFORGE_TESTS_SUPPORT_SCRATCH_DIR_H_
