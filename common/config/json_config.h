// Reading protobuf messages written as JSON (protobuf's JSON mapping): job
// specs and service configs. Unknown fields are errors, so a typo in a field
// name is reported instead of silently ignored.
//
//   kforge::v1::LearnerConfig config;
//   KF_RETURN_IF_ERROR(LoadConfigFile("learner.json", &config, "learner_config"));
//   // defaults applied, every range checked
#ifndef KFORGE_COMMON_CONFIG_JSON_CONFIG_H_
#define KFORGE_COMMON_CONFIG_JSON_CONFIG_H_

#include <string>
#include "absl/strings/string_view.h"

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kforge {

// Reads a whole file. NOT_FOUND / PERMISSION_DENIED name the path.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes atomically (temporary file, then rename), so readers never see a
// partial file.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// Parses JSON into `message` (cleared first). INVALID_ARGUMENT carries the
// parser's explanation, which names the offending field.
absl::Status ParseJsonMessage(absl::string_view json, google::protobuf::Message* message);

// Message to JSON with the proto field names, for files people read, by
// protobuf's JSON printer. Deterministic: map keys (and a
// google::protobuf::Struct's, the JSON tree that ParseJsonMessage reads
// into) come out sorted, so the same message always prints the same bytes.
std::string ToJson(const google::protobuf::Message& message, bool multiline = true);

// Applies annotation defaults, then checks every annotated range; errors are
// prefixed with `root_name`.
absl::Status FinalizeConfig(google::protobuf::Message* message, absl::string_view root_name);

// ReadFileToString + ParseJsonMessage + FinalizeConfig. An empty path yields
// the all-defaults config.
absl::Status LoadConfigFile(const std::string& path, google::protobuf::Message* message,
                            absl::string_view root_name);

}  // namespace kforge

#endif  // KFORGE_COMMON_CONFIG_JSON_CONFIG_H_
