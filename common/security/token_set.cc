#include "common/security/token_set.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

std::array<unsigned char, 32> Sha256(absl::string_view text) {
  std::array<unsigned char, 32> digest{};
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return digest;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenSet>> TokenSet::Create(std::vector<std::string> files,
                                                           absl::Duration reload_interval) {
  if (files.empty()) return absl::InvalidArgumentError("no token files given");
  KF_ASSIGN_OR_RETURN(Loaded loaded, Load(files));
  return std::unique_ptr<TokenSet>(
      new TokenSet(std::move(files), reload_interval, std::move(loaded)));
}

TokenSet::TokenSet(std::vector<std::string> files, absl::Duration reload_interval, Loaded loaded)
    : files_(std::move(files)),
      reload_interval_(reload_interval),
      loaded_(std::move(loaded)),
      next_check_(absl::Now() + reload_interval) {}

std::vector<TokenSet::FileStamp> TokenSet::Stamps(const std::vector<std::string>& files) {
  std::vector<FileStamp> stamps;
  for (const std::string& file : files) {
    FileStamp stamp;
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0) {
      stamp = {.inode = st.st_ino,
               .size = st.st_size,
               .mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
    }
    stamps.push_back(stamp);
  }
  return stamps;
}

absl::StatusOr<TokenSet::Loaded> TokenSet::Load(const std::vector<std::string>& files) {
  Loaded loaded;
  // Stamped before reading: a write racing the read shows up as a change
  // at the next check and is read again.
  loaded.stamps = Stamps(files);
  for (const std::string& file : files) {
    absl::StatusOr<std::string> text = ReadFileToString(file);
    if (!text.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("token file ", file, ": ",
                                                     text.status().message()));
    }
    int line_number = 0;
    size_t tokens_in_file = 0;
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      ++line_number;
      const absl::string_view token = absl::StripAsciiWhitespace(line);
      if (token.empty() || token.front() == '#') continue;
      // The message names the line, never the token.
      if (token.size() < kMinTokenLength) {
        return absl::InvalidArgumentError(absl::StrCat("token file ", file, " line ", line_number,
                                                       ": a token needs at least ",
                                                       kMinTokenLength, " characters"));
      }
      for (char c : token) {
        if (absl::ascii_isspace(static_cast<unsigned char>(c)) ||
            !absl::ascii_isprint(static_cast<unsigned char>(c))) {
          return absl::InvalidArgumentError(absl::StrCat(
              "token file ", file, " line ", line_number,
              ": a token is printable ASCII without spaces (it travels in an HTTP/2 header)"));
        }
      }
      if (loaded.first.empty()) loaded.first = std::string(token);
      loaded.digests.push_back(Sha256(token));
      ++tokens_in_file;
    }
    if (tokens_in_file == 0) {
      return absl::InvalidArgumentError(absl::StrCat("token file ", file, ": holds no token"));
    }
  }
  return loaded;
}

void TokenSet::MaybeReload() const {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (absl::Now() < next_check_) return;
  }
  absl::MutexLock lock(&mu_);
  if (absl::Now() < next_check_) return;  // another caller just checked
  next_check_ = absl::Now() + reload_interval_;
  const std::vector<FileStamp> stamps = Stamps(files_);
  if (stamps == loaded_.stamps || stamps == failed_stamps_) return;
  absl::StatusOr<Loaded> loaded = Load(files_);
  if (!loaded.ok()) {
    failed_stamps_ = stamps;
    log_.Warning("token files changed but cannot be used; keeping the previous tokens",
                 {{"error", loaded.status().message()}});
    return;
  }
  log_.Info("token files reloaded", {{"tokens", loaded->digests.size()}});
  loaded_ = *std::move(loaded);
  failed_stamps_.clear();
}

bool TokenSet::Accepts(absl::string_view presented) const {
  MaybeReload();
  const Digest digest = Sha256(presented);
  absl::ReaderMutexLock lock(&mu_);
  // Every token is compared, whatever matched before.
  int matched = 0;
  for (const Digest& accepted : loaded_.digests) {
    matched |= CRYPTO_memcmp(accepted.data(), digest.data(), digest.size()) == 0 ? 1 : 0;
  }
  return matched != 0;
}

std::string TokenSet::First() const {
  MaybeReload();
  absl::ReaderMutexLock lock(&mu_);
  return loaded_.first;
}

size_t TokenSet::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return loaded_.digests.size();
}

}  // namespace kforge
