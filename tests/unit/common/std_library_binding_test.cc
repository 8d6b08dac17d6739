// The std::filesystem calls of a binary that links LibTorch must run the
// system libstdc++'s code. PyTorch's wheels export their own copies of some
// of these functions from libtorch, and those jump to address 0 when called
// from our code (see cmake/KforgeDependencies.cmake); this binary links
// LibTorch, so it sees the same lookup order as the services.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace kforge {
namespace {

std::string ObjectDefining(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "<unknown>";
  return info.dli_fname;
}

TEST(StdLibraryBindingTest, FilesystemFunctionsBindToLibstdcxx) {
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&, std::error_code&);
  using Copy = void (*)(const std::filesystem::path&, const std::filesystem::path&,
                        std::filesystem::copy_options, std::error_code&);
  using CreateDirectories = bool (*)(const std::filesystem::path&, std::error_code&);
  const RemoveAll remove_all = &std::filesystem::remove_all;
  const Copy copy = &std::filesystem::copy;
  const CreateDirectories create_directories = &std::filesystem::create_directories;
  for (const void* function : {reinterpret_cast<const void*>(remove_all),
                               reinterpret_cast<const void*>(copy),
                               reinterpret_cast<const void*>(create_directories)}) {
    // libstdc++.so.6 where it is shared; never one of PyTorch's libraries.
    const std::string object = ObjectDefining(function);
    EXPECT_EQ(object.find("libtorch"), std::string::npos)
        << "a std::filesystem function resolves to " << object;
    EXPECT_EQ(object.find("libc10"), std::string::npos)
        << "a std::filesystem function resolves to " << object;
  }
}

TEST(StdLibraryBindingTest, RemoveAllDeletesATree) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("kforge-binding-" + std::to_string(getpid()));
  std::filesystem::create_directories(root / "a" / "b");
  std::error_code error;
  EXPECT_EQ(std::filesystem::remove_all(root, error), 3u) << error.message();
  EXPECT_FALSE(std::filesystem::exists(root));
}

}  // namespace
}  // namespace kforge
