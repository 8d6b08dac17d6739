// Checks a message against the `(kforge.v1.field)` annotations: required
// fields, numeric ranges and repeated-field sizes. The error names the field
// by its path from the root and says what is wrong with which value:
//
//   KF_RETURN_IF_ERROR(ValidateProtoFields(spec, "spec"));
//   // INVALID_ARGUMENT: spec.grpo.clip_low: 1.5 is above the maximum 1
//
// Apply defaults first (proto_defaults.h): validation sees the effective
// values.
#ifndef KFORGE_COMMON_CONFIG_PROTO_VALIDATION_H_
#define KFORGE_COMMON_CONFIG_PROTO_VALIDATION_H_

#include "absl/strings/string_view.h"

#include <google/protobuf/message.h>

#include "absl/status/status.h"

namespace kforge {

// Returns the first violation found, as INVALID_ARGUMENT.
absl::Status ValidateProtoFields(const google::protobuf::Message& message,
                                 absl::string_view root_name);

}  // namespace kforge

#endif  // KFORGE_COMMON_CONFIG_PROTO_VALIDATION_H_
