// Fills unset fields of a message from the `(kforge.v1.field).default`
// annotations in proto/kforge/v1/*.proto, recursively, so the proto is the
// one source of truth for every default.
//
//   kforge::v1::JobSpec spec = ...;          // as the user wrote it
//   KF_RETURN_IF_ERROR(ApplyProtoDefaults(&spec));
//   spec.grpo().group_size();                // 8 unless the user set it
//
// Singular message fields are created (so their own defaults apply) unless
// they belong to a oneof. A default on a message field fills only the
// sub-fields the user left unset.
#ifndef KFORGE_COMMON_CONFIG_PROTO_DEFAULTS_H_
#define KFORGE_COMMON_CONFIG_PROTO_DEFAULTS_H_

#include <google/protobuf/message.h>

#include "absl/status/status.h"

namespace kforge {

// Returns INTERNAL when an annotation itself does not parse (a bug in the
// proto, caught by the unit tests that apply defaults to every config type).
absl::Status ApplyProtoDefaults(google::protobuf::Message* message);

}  // namespace kforge

#endif  // KFORGE_COMMON_CONFIG_PROTO_DEFAULTS_H_
