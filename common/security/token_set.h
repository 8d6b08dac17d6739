// Bearer tokens read from files, for both ends of a call: a server asks
// whether a presented token is one of them, a client presents the first.
//
//   KF_ASSIGN_OR_RETURN(auto tokens, TokenSet::Create({"/etc/kforge/tokens/job"},
//                                                     absl::Seconds(10)));
//   if (!tokens->Accepts(presented)) return PermissionDenied();
//
// A file holds one token per line; blank lines and lines starting with '#'
// are skipped, surrounding whitespace is trimmed, and a token shorter than
// kMinTokenLength is refused (a guessable secret is worse than none).
//
// Rotation: the files are checked for changes (size, mtime, inode: a
// Kubernetes Secret update swaps a symlink) at most once per
// reload_interval, on the next call that needs them, so no thread is
// needed. A file that changed into something unreadable or invalid keeps
// the last good tokens and is reported once through the logger.
//
// Secrecy: the server side keeps only SHA-256 digests of the accepted
// tokens and compares digests in constant time, against every accepted
// token (no early exit, so timing reveals neither which token nor how much
// of one matched). Only the first token is kept in clear, for presenting.
// Neither tokens nor digests are ever logged; errors name files and lines.
#ifndef KFORGE_COMMON_SECURITY_TOKEN_SET_H_
#define KFORGE_COMMON_SECURITY_TOKEN_SET_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/logging/logger.h"

namespace kforge {

inline constexpr size_t kMinTokenLength = 16;

class TokenSet {
 public:
  // Every file must exist and hold at least one valid token.
  static absl::StatusOr<std::unique_ptr<TokenSet>> Create(std::vector<std::string> files,
                                                          absl::Duration reload_interval);

  TokenSet(const TokenSet&) = delete;
  TokenSet& operator=(const TokenSet&) = delete;

  // True when `presented` is one of the tokens (constant time in the
  // presented value).
  bool Accepts(absl::string_view presented) const ABSL_LOCKS_EXCLUDED(mu_);

  // The first token of the first file: what a client presents.
  std::string First() const ABSL_LOCKS_EXCLUDED(mu_);

  // Tokens currently accepted (for the start-up log).
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Digest = std::array<unsigned char, 32>;
  struct FileStamp {
    uint64_t inode = 0;
    int64_t size = -1;
    int64_t mtime_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };
  struct Loaded {
    std::vector<Digest> digests;
    std::string first;
    std::vector<FileStamp> stamps;
  };

  TokenSet(std::vector<std::string> files, absl::Duration reload_interval, Loaded loaded);
  static absl::StatusOr<Loaded> Load(const std::vector<std::string>& files);
  static std::vector<FileStamp> Stamps(const std::vector<std::string>& files);
  // Re-reads the files when the interval has passed and they changed.
  void MaybeReload() const ABSL_LOCKS_EXCLUDED(mu_);

  const std::vector<std::string> files_;
  const absl::Duration reload_interval_;
  const Logger log_{"auth"};
  mutable absl::Mutex mu_;
  mutable Loaded loaded_ ABSL_GUARDED_BY(mu_);
  mutable absl::Time next_check_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<FileStamp> failed_stamps_ ABSL_GUARDED_BY(mu_);  // reported once
};

}  // namespace kforge

#endif  // KFORGE_COMMON_SECURITY_TOKEN_SET_H_
