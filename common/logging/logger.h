// Structured logs: one logfmt line per event on stderr, easy for people to
// read and for log shippers (Loki, Fluent Bit) to parse.
//
//   Logger log("learner");
//   log.Info("listening", {{"grpc_port", 50051}, {"metrics_port", 9090}});
//   // ts=2026-11-22T12:00:00.000Z level=info component=learner
//   //   msg=listening grpc_port=50051 metrics_port=9090
#ifndef KFORGE_COMMON_LOGGING_LOGGER_H_
#define KFORGE_COMMON_LOGGING_LOGGER_H_

#include <initializer_list>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>

#include "absl/strings/str_cat.h"

namespace kforge {

// One key=value pair of a log line. Values of any type absl::StrCat accepts.
struct LogField {
  template <typename T>
  LogField(absl::string_view k, const T& v) : key(k), value(absl::StrCat(v)) {}
  LogField(absl::string_view k, bool v) : key(k), value(v ? "true" : "false") {}
  absl::string_view key;
  std::string value;
};

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Cheap to copy; holds only the component name. Thread-safe: each line is
// written with a single write(2).
class Logger {
 public:
  explicit Logger(std::string component) : component_(std::move(component)) {}

  void Debug(absl::string_view msg, std::initializer_list<LogField> fields = {}) const {
    Write(LogLevel::kDebug, msg, fields);
  }
  void Info(absl::string_view msg, std::initializer_list<LogField> fields = {}) const {
    Write(LogLevel::kInfo, msg, fields);
  }
  void Warning(absl::string_view msg, std::initializer_list<LogField> fields = {}) const {
    Write(LogLevel::kWarning, msg, fields);
  }
  void Error(absl::string_view msg, std::initializer_list<LogField> fields = {}) const {
    Write(LogLevel::kError, msg, fields);
  }

  // Formats a line without writing it (used by Write and by tests).
  std::string Format(LogLevel level, absl::string_view msg,
                     std::initializer_list<LogField> fields) const;

 private:
  void Write(LogLevel level, absl::string_view msg,
             std::initializer_list<LogField> fields) const;

  std::string component_;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_LOGGING_LOGGER_H_
