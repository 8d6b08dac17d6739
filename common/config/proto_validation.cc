#include "common/config/proto_validation.h"

#include <cmath>
#include <optional>
#include <string>

#include <google/protobuf/descriptor.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kforge/v1/options.pb.h"

namespace kforge {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::optional<double> NumericValue(const Message& message, const FieldDescriptor* field) {
  const Reflection* r = message.GetReflection();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return r->GetInt32(message, field);
    case FieldDescriptor::CPPTYPE_INT64: return static_cast<double>(r->GetInt64(message, field));
    case FieldDescriptor::CPPTYPE_UINT32: return r->GetUInt32(message, field);
    case FieldDescriptor::CPPTYPE_UINT64: return static_cast<double>(r->GetUInt64(message, field));
    case FieldDescriptor::CPPTYPE_FLOAT: return r->GetFloat(message, field);
    case FieldDescriptor::CPPTYPE_DOUBLE: return r->GetDouble(message, field);
    default: return std::nullopt;
  }
}

absl::Status CheckRange(const std::string& path, double value, const kforge::v1::FieldSpec& spec,
                        absl::string_view what) {
  if (std::isnan(value)) return absl::InvalidArgumentError(absl::StrCat(path, ": is NaN"));
  std::string unit = spec.unit().empty() ? "" : absl::StrCat(" ", spec.unit());
  if (spec.has_min() && value < spec.min()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what, value, unit,
                                                   " is below the minimum ", spec.min(), unit));
  }
  if (spec.has_max() && value > spec.max()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what, value, unit,
                                                   " is above the maximum ", spec.max(), unit));
  }
  if (spec.has_greater_than() && !(value > spec.greater_than())) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what, value, unit,
                                                   " must be greater than ", spec.greater_than(),
                                                   unit));
  }
  return absl::OkStatus();
}

absl::Status CheckRequired(const Message& message, const FieldDescriptor* field,
                           const std::string& path) {
  const Reflection* r = message.GetReflection();
  bool present = false;
  if (field->is_repeated()) {
    present = r->FieldSize(message, field) > 0;
  } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    present = !r->GetString(message, field).empty();
  } else {
    present = r->HasField(message, field);
  }
  if (!present) return absl::InvalidArgumentError(absl::StrCat(path, ": is required"));
  return absl::OkStatus();
}

absl::Status Validate(const Message& message, const std::string& prefix) {
  const auto* descriptor = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    const std::string path = absl::StrCat(prefix, ".", field->name());
    const kforge::v1::FieldSpec& spec = field->options().GetExtension(kforge::v1::field);
    if (spec.required()) KF_RETURN_IF_ERROR(CheckRequired(message, field, path));
    if (field->is_map()) continue;
    if (field->is_repeated()) {
      const int size = r->FieldSize(message, field);
      KF_RETURN_IF_ERROR(CheckRange(path, size, spec, "element count "));
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        for (int j = 0; j < size; ++j) {
          KF_RETURN_IF_ERROR(
              Validate(r->GetRepeatedMessage(message, field, j), absl::StrCat(path, "[", j, "]")));
        }
      }
      continue;
    }
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (r->HasField(message, field)) {
        KF_RETURN_IF_ERROR(Validate(r->GetMessage(message, field), path));
      }
      continue;
    }
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_ENUM && !spec.default_().empty() &&
        r->GetEnumValue(message, field) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": must not be ", r->GetEnum(message, field)->name()));
    }
    if (std::optional<double> value = NumericValue(message, field)) {
      KF_RETURN_IF_ERROR(CheckRange(path, *value, spec, ""));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateProtoFields(const Message& message, absl::string_view root_name) {
  return Validate(message, std::string(root_name));
}

}  // namespace kforge
