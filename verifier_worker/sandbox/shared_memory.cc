#include "verifier_worker/sandbox/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

// mmap refuses a length of 0; an empty buffer maps one page it never shows.
uint64_t MapLength(uint64_t size) { return size == 0 ? 1 : size; }

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<SharedMemory> SharedMemory::Create(const std::string& name, uint64_t size) {
  UniqueFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return Errno("memfd_create");
  if (::ftruncate(fd.get(), static_cast<off_t>(MapLength(size))) != 0) {
    return Errno(absl::StrCat("ftruncate to ", size, " bytes"));
  }
  return SharedMemory(std::move(fd), size);
}

absl::Status SharedMemory::Write(uint64_t offset, absl::string_view bytes) {
  if (sealed()) return absl::FailedPreconditionError("the shared buffer is sealed");
  if (offset > size_ || bytes.size() > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat(bytes.size(), " bytes at ", offset,
                                              " do not fit a buffer of ", size_));
  }
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd_.get(), bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("writing the shared buffer");
    }
    bytes.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

absl::Status SharedMemory::Truncate(uint64_t size) {
  if (sealed()) return absl::FailedPreconditionError("the shared buffer is sealed");
  if (size >= size_) return absl::OkStatus();
  if (::ftruncate(fd_.get(), static_cast<off_t>(MapLength(size))) != 0) {
    return Errno(absl::StrCat("ftruncate to ", size, " bytes"));
  }
  size_ = size;
  return absl::OkStatus();
}

SharedMemory::SharedMemory(SharedMemory&& other) noexcept
    : fd_(std::move(other.fd_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

SharedMemory& SharedMemory::operator=(SharedMemory&& other) noexcept {
  if (this != &other) {
    Unmap();
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedMemory::~SharedMemory() { Unmap(); }

void SharedMemory::Unmap() {
  if (data_ != nullptr) ::munmap(data_, MapLength(size_));
  data_ = nullptr;
}

absl::Status SharedMemory::Seal() {
  if (sealed()) return absl::OkStatus();
  constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
  if (::fcntl(fd_.get(), F_ADD_SEALS, kSeals) != 0) {
    if (errno == EBUSY) {
      return absl::FailedPreconditionError(
          "another process still maps the shared buffer writable, so it cannot be sealed");
    }
    return Errno("sealing the shared buffer");
  }
  // The peer may have shrunk the memfd before the seal (a candidate holds
  // its reply buffer's descriptor): reading past its end would raise
  // SIGBUS in this process. The seals fix the size from here on.
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return Errno("fstat of the sealed buffer");
  if (static_cast<uint64_t>(st.st_size) < MapLength(size_)) {
    return absl::DataLossError(absl::StrCat("the shared buffer was shrunk to ", st.st_size,
                                            " of its ", size_, " bytes"));
  }
  void* data = ::mmap(nullptr, MapLength(size_), PROT_READ, MAP_SHARED, fd_.get(), 0);
  if (data == MAP_FAILED) return Errno("mmap of the sealed buffer");
  data_ = static_cast<char*>(data);
  return absl::OkStatus();
}

}  // namespace kforge
