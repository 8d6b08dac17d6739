#include "common/process/state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/server/host_name.h"

namespace kforge {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

std::string ReadHolder(int fd) {
  char buffer[512] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
  const std::string holder = n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
  return holder.empty() ? "another process (it has not written its name yet)"
                        : std::string(absl::StripAsciiWhitespace(holder));
}

}  // namespace

absl::StatusOr<std::unique_ptr<StateLock>> StateLock::Acquire(const std::string& dir,
                                                              const std::string& owner,
                                                              const std::string& name) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  const std::string path = (std::filesystem::path(dir) / name).string();
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return ErrnoError("cannot open the lock file", path);
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return ErrnoError("cannot lock", path);
    return absl::FailedPreconditionError(absl::StrCat("state folder ", dir, " is in use by ",
                                                      ReadHolder(fd.get()), "; lock file ", path));
  }
  // Ours now: say who holds it, for the next one to name.
  const std::string holder =
      absl::StrCat("pid ", ::getpid(), " on host ", HostName(), " since ",
                   absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()),
                   " (", owner, ")\n");
  if (::ftruncate(fd.get(), 0) != 0 ||
      ::pwrite(fd.get(), holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size())) {
    return ErrnoError("cannot write the lock file", path);
  }
  return std::unique_ptr<StateLock>(new StateLock(path, std::move(fd)));
}

}  // namespace kforge
