// Paths relative to the running binary, for data installed beside it
// (build/bin/kforge-learner finds build/share/kforge/tasks).
#ifndef KFORGE_COMMON_SERVER_EXECUTABLE_PATH_H_
#define KFORGE_COMMON_SERVER_EXECUTABLE_PATH_H_

#include <filesystem>
#include <string>

namespace kforge {

// The folder holding the running executable ("/opt/kforge/bin").
inline std::filesystem::path ExecutableDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::current_path() : exe.parent_path();
}

// `<prefix>/share/kforge/<relative>` where the executable is `<prefix>/bin/x`.
inline std::string SharedDataPath(const std::string& relative) {
  return (ExecutableDir().parent_path() / "share" / "kforge" / relative).string();
}

}  // namespace kforge

#endif  // KFORGE_COMMON_SERVER_EXECUTABLE_PATH_H_
