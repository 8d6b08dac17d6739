#include "common/config/proto_defaults.h"

#include <memory>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kforge/v1/options.pb.h"

namespace kforge {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Guards against recursive message types; kforge's configs are shallow.
constexpr int kMaxDepth = 32;

absl::Status ApplyScalarDefault(Message* message, const FieldDescriptor* field,
                                const std::string& text) {
  if (!google::protobuf::TextFormat::ParseFieldValueFromString(text, field, message)) {
    return absl::InternalError(absl::StrCat("default '", text, "' of field ",
                                            field->full_name(), " does not parse"));
  }
  return absl::OkStatus();
}

absl::Status ApplyMessageDefault(Message* message, const FieldDescriptor* field,
                                 const std::string& text) {
  const Reflection* reflection = message->GetReflection();
  Message* target = reflection->MutableMessage(message, field);
  std::unique_ptr<Message> merged(target->New());
  if (!google::protobuf::TextFormat::ParseFromString(text, merged.get())) {
    return absl::InternalError(absl::StrCat("default '", text, "' of field ",
                                            field->full_name(), " does not parse"));
  }
  // What the user set wins over the default.
  merged->MergeFrom(*target);
  target->CopyFrom(*merged);
  return absl::OkStatus();
}

absl::Status Apply(Message* message, int depth) {
  if (depth > kMaxDepth) return absl::OkStatus();
  const Descriptor* descriptor = message->GetDescriptor();
  const Reflection* reflection = message->GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    const std::string& text = field->options().GetExtension(kforge::v1::field).default_();
    const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (field->is_map()) continue;
    if (field->is_repeated()) {
      if (!is_message) continue;
      for (int j = 0; j < reflection->FieldSize(*message, field); ++j) {
        KF_RETURN_IF_ERROR(
            Apply(reflection->MutableRepeatedMessage(message, field, j), depth + 1));
      }
      continue;
    }
    if (is_message) {
      // A oneof member is created only if the user chose it.
      if (field->real_containing_oneof() != nullptr && !reflection->HasField(*message, field)) {
        continue;
      }
      if (!text.empty()) KF_RETURN_IF_ERROR(ApplyMessageDefault(message, field, text));
      KF_RETURN_IF_ERROR(Apply(reflection->MutableMessage(message, field), depth + 1));
      continue;
    }
    if (!text.empty() && !reflection->HasField(*message, field)) {
      KF_RETURN_IF_ERROR(ApplyScalarDefault(message, field, text));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyProtoDefaults(Message* message) { return Apply(message, 0); }

}  // namespace kforge
