// A fresh temporary directory, removed with everything in it on scope exit.
#ifndef KFORGE_TESTS_SUPPORT_TEMP_DIR_H_
#define KFORGE_TESTS_SUPPORT_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace kforge::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kforge-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& relative) const {
    return (std::filesystem::path(path_) / relative).string();
  }

 private:
  std::string path_;
};

}  // namespace kforge::testing

#endif  // KFORGE_TESTS_SUPPORT_TEMP_DIR_H_
