// A whole file mapped read-only into memory, unmapped when the object dies.
//
//   KF_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
//   absl::Span<const std::byte> bytes = file->bytes();  // valid while `file` lives
//
// The descriptor is closed once the mapping exists (the mapping keeps the
// pages reachable). An empty file maps to an empty span.
#ifndef KFORGE_MODEL_CHECKPOINT_MAPPED_FILE_H_
#define KFORGE_MODEL_CHECKPOINT_MAPPED_FILE_H_

#include <cstddef>
#include <filesystem>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kforge::checkpoint {

class MappedFile {
 public:
  // NOT_FOUND / PERMISSION_DENIED / INTERNAL naming the path and errno's text.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::filesystem::path& path);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  absl::Span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile(std::filesystem::path path, const std::byte* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::filesystem::path path_;
  const std::byte* data_;  // nullptr when size_ == 0
  size_t size_;
};

}  // namespace kforge::checkpoint

#endif  // KFORGE_MODEL_CHECKPOINT_MAPPED_FILE_H_
