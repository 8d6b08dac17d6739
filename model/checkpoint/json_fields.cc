#include "model/checkpoint/json_fields.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/config/json_config.h"

namespace kforge::checkpoint {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;

// Doubles hold every integer up to 2^53 exactly; beyond, a JSON integer may
// already have been rounded by the parser.
constexpr double kMaxExactInt = 9007199254740992.0;

}  // namespace

absl::StatusOr<Struct> ParseJsonObject(absl::string_view text) {
  Struct root;
  absl::Status parsed = ParseJsonMessage(text, &root);
  if (!parsed.ok()) return absl::InvalidArgumentError(parsed.message());
  return root;
}

std::optional<int64_t> AsInt(const Value& value) {
  if (value.kind_case() != Value::kNumberValue) return std::nullopt;
  const double x = value.number_value();
  if (!std::isfinite(x) || std::floor(x) != x || std::fabs(x) > kMaxExactInt) return std::nullopt;
  return static_cast<int64_t>(x);
}

const Value* JsonObject::Find(const std::string& name) const {
  const auto it = object_.fields().find(name);
  if (it == object_.fields().end() || it->second.kind_case() == Value::kNullValue) {
    return nullptr;
  }
  return &it->second;
}

absl::Status JsonObject::FieldError(absl::string_view name, absl::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat(where_, ": field \"", name, "\" ", problem));
}

absl::StatusOr<int64_t> JsonObject::RequiredInt(const std::string& name) const {
  const Value* value = Find(name);
  if (value == nullptr) return FieldError(name, "is missing");
  std::optional<int64_t> x = AsInt(*value);
  if (!x.has_value()) return FieldError(name, "is not an integer");
  return *x;
}

absl::StatusOr<int64_t> JsonObject::IntOr(const std::string& name, int64_t fallback) const {
  if (Find(name) == nullptr) return fallback;
  return RequiredInt(name);
}

absl::StatusOr<double> JsonObject::RequiredDouble(const std::string& name) const {
  const Value* value = Find(name);
  if (value == nullptr) return FieldError(name, "is missing");
  if (value->kind_case() != Value::kNumberValue) return FieldError(name, "is not a number");
  return value->number_value();
}

absl::StatusOr<double> JsonObject::DoubleOr(const std::string& name, double fallback) const {
  if (Find(name) == nullptr) return fallback;
  return RequiredDouble(name);
}

absl::StatusOr<bool> JsonObject::BoolOr(const std::string& name, bool fallback) const {
  const Value* value = Find(name);
  if (value == nullptr) return fallback;
  if (value->kind_case() != Value::kBoolValue) return FieldError(name, "is not a boolean");
  return value->bool_value();
}

absl::StatusOr<std::string> JsonObject::RequiredString(const std::string& name) const {
  const Value* value = Find(name);
  if (value == nullptr) return FieldError(name, "is missing");
  if (value->kind_case() != Value::kStringValue) return FieldError(name, "is not a string");
  return value->string_value();
}

absl::StatusOr<std::string> JsonObject::StringOr(const std::string& name,
                                                 const std::string& fallback) const {
  if (Find(name) == nullptr) return fallback;
  return RequiredString(name);
}

google::protobuf::Value JsonNumber(double value) {
  Value v;
  v.set_number_value(value);
  return v;
}

google::protobuf::Value JsonString(absl::string_view value) {
  Value v;
  v.set_string_value(std::string(value));
  return v;
}

google::protobuf::Value JsonBool(bool value) {
  Value v;
  v.set_bool_value(value);
  return v;
}

google::protobuf::Value JsonNull() {
  Value v;
  v.set_null_value(google::protobuf::NULL_VALUE);
  return v;
}

google::protobuf::Value JsonList(std::vector<google::protobuf::Value> items) {
  Value v;
  google::protobuf::ListValue* list = v.mutable_list_value();
  for (Value& item : items) *list->add_values() = std::move(item);
  return v;
}

google::protobuf::Struct JsonObjectOf(
    std::vector<std::pair<std::string, google::protobuf::Value>> fields) {
  google::protobuf::Struct object;
  for (auto& [name, value] : fields) (*object.mutable_fields())[name] = std::move(value);
  return object;
}

google::protobuf::Value JsonObjectValue(google::protobuf::Struct object) {
  Value v;
  *v.mutable_struct_value() = std::move(object);
  return v;
}

std::string JsonText(const google::protobuf::Struct& object) {
  return ToJson(object, /*multiline=*/true) + "\n";
}

}  // namespace kforge::checkpoint
