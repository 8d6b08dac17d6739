#include "common/logging/logger.h"

#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kforge {
namespace {

absl::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}

// logfmt quoting: bare when the value has no space, quote or '='; otherwise
// double-quoted with \" \\ \n escapes.
void AppendValue(std::string& out, absl::string_view value) {
  bool bare = !value.empty();
  for (char c : value) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' ||
        absl::ascii_iscntrl(static_cast<unsigned char>(c))) {
      bare = false;
      break;
    }
  }
  if (bare) {
    out.append(value.data(), value.size());
    return;
  }
  out.push_back('"');
  for (char c : value) {
    switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\n': out.append("\\n"); break;
      case '\t': out.append("\\t"); break;
      default: out.push_back(c);
    }
  }
  out.push_back('"');
}

}  // namespace

std::string Logger::Format(LogLevel level, absl::string_view msg,
                           std::initializer_list<LogField> fields) const {
  std::string line = absl::StrCat(
      "ts=", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
      " level=", LevelName(level), " component=", component_, " msg=");
  AppendValue(line, msg);
  for (const LogField& field : fields) {
    absl::StrAppend(&line, " ", field.key, "=");
    AppendValue(line, field.value);
  }
  line.push_back('\n');
  return line;
}

void Logger::Write(LogLevel level, absl::string_view msg,
                   std::initializer_list<LogField> fields) const {
  const std::string line = Format(level, msg, fields);
  // One write keeps lines from concurrent threads whole.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace kforge
