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

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  out.reserve(s.size() + 2);
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace kforge::checkpoint
