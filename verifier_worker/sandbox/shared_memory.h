// Bytes shared with a harness process through a memfd instead of copied
// through its socket: a set's inputs, sealed read-only once per reference
// epoch and mapped by each candidate it is sent to, and a buffer a
// candidate writes its outputs into, sealed before the verifier reads it.
// A seal (F_SEAL_WRITE) is the kernel's promise that no process, the
// candidate included, can change the bytes any more: it is refused while
// anyone still maps the memfd writable.
//
//   KF_ASSIGN_OR_RETURN(SharedMemory inputs, SharedMemory::Create("inputs", n));
//   KF_RETURN_IF_ERROR(inputs.Write(0, bytes));
//   KF_RETURN_IF_ERROR(inputs.Seal());      // now read-only for everyone
//   channel.Send(frame, {inputs.fd()});
//
// This process never maps a buffer writable: a fork of it (a harness
// process being started) would copy that mapping, and while the copy lives
// the seal is refused (seen: a correct candidate's reply failed so).
#ifndef KFORGE_VERIFIER_WORKER_SANDBOX_SHARED_MEMORY_H_
#define KFORGE_VERIFIER_WORKER_SANDBOX_SHARED_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/process/unique_fd.h"

namespace kforge {

class SharedMemory {
 public:
  // A memfd of `size` bytes (zeroes), not mapped here. `name` shows in
  // /proc/<pid>/fd of whoever holds it.
  static absl::StatusOr<SharedMemory> Create(const std::string& name, uint64_t size);
  SharedMemory(SharedMemory&& other) noexcept;
  SharedMemory& operator=(SharedMemory&& other) noexcept;
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  ~SharedMemory();

  // Writes `bytes` at `offset` (through the descriptor) before the seal.
  absl::Status Write(uint64_t offset, absl::string_view bytes);
  // Shrinks the buffer to `size` bytes before the seal (an offered reply
  // buffer is made as large as a reply may be, and holds what was written).
  absl::Status Truncate(uint64_t size);
  // Seals the memfd against writes and size changes and maps it read-only.
  // FAILED_PRECONDITION when another process still maps it writable: the
  // seal is then not applied and bytes() stays empty. DATA_LOSS when
  // another process shrank it below size(): it is sealed but never mapped.
  absl::Status Seal();

  // The bytes once sealed; empty before.
  absl::string_view bytes() const {
    return data_ == nullptr ? absl::string_view() : absl::string_view(data_, size_);
  }
  uint64_t size() const { return size_; }
  int fd() const { return fd_.get(); }
  // Only a sealed buffer is mapped here (read-only).
  bool sealed() const { return data_ != nullptr; }

 private:
  SharedMemory(UniqueFd fd, uint64_t size) : fd_(std::move(fd)), size_(size) {}
  void Unmap();

  UniqueFd fd_;
  char* data_ = nullptr;  // the read-only mapping, once sealed
  uint64_t size_ = 0;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_SANDBOX_SHARED_MEMORY_H_
