// Small helpers over google::protobuf::Struct, the repo's JSON tree (parsed
// by ParseJsonMessage), for the checkpoint files: config.json, safetensors
// headers and model.safetensors.index.json. Internal to model/checkpoint.
//
//   KF_ASSIGN_OR_RETURN(google::protobuf::Struct root, ParseJsonObject(text));
//   JsonObject config(root, "/m/config.json");
//   KF_ASSIGN_OR_RETURN(int64_t hidden, config.RequiredInt("hidden_size"));
//   // errors read "/m/config.json: field \"hidden_size\" is missing"
//
// And for the writers (config.json, tokenizer files, safetensors headers and
// index, written here and by learner/checkpoint): values to build a Struct
// from, printed by ToJson (protobuf's JSON printer, keys sorted), so quoting
// and escaping are the library's, never string concatenation:
//
//   google::protobuf::Struct config = JsonObjectOf({{"hidden_size", JsonNumber(64)},
//                                                   {"architectures", JsonList({JsonString(a)})}});
//   WriteFileAtomically(path, JsonText(config));
#ifndef KFORGE_MODEL_CHECKPOINT_JSON_FIELDS_H_
#define KFORGE_MODEL_CHECKPOINT_JSON_FIELDS_H_

#include <google/protobuf/struct.pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kforge::checkpoint {

// INVALID_ARGUMENT with the parser's explanation when `text` is not a JSON object.
absl::StatusOr<google::protobuf::Struct> ParseJsonObject(absl::string_view text);

// A JSON object and where it came from ("FILE" or "FILE: tensor \"x\""),
// the prefix of every error. Borrows the Struct.
class JsonObject {
 public:
  JsonObject(const google::protobuf::Struct& object, std::string where)
      : object_(object), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  const google::protobuf::Struct& object() const { return object_; }

  // nullptr when absent or null.
  const google::protobuf::Value* Find(const std::string& name) const;

  // An integer (a JSON number without a fraction, |x| <= 2^53).
  absl::StatusOr<int64_t> RequiredInt(const std::string& name) const;
  absl::StatusOr<int64_t> IntOr(const std::string& name, int64_t fallback) const;
  absl::StatusOr<double> RequiredDouble(const std::string& name) const;
  absl::StatusOr<double> DoubleOr(const std::string& name, double fallback) const;
  absl::StatusOr<bool> BoolOr(const std::string& name, bool fallback) const;
  absl::StatusOr<std::string> RequiredString(const std::string& name) const;
  absl::StatusOr<std::string> StringOr(const std::string& name, const std::string& fallback) const;

  // INVALID_ARGUMENT "WHERE: field \"NAME\" PROBLEM".
  absl::Status FieldError(absl::string_view name, absl::string_view problem) const;

 private:
  const google::protobuf::Struct& object_;
  std::string where_;
};

// The integer a JSON number holds, or nullopt when it is not one (a
// fraction, beyond 2^53, not a number).
std::optional<int64_t> AsInt(const google::protobuf::Value& value);

google::protobuf::Value JsonNumber(double value);
google::protobuf::Value JsonString(absl::string_view value);
google::protobuf::Value JsonBool(bool value);
google::protobuf::Value JsonNull();
google::protobuf::Value JsonList(std::vector<google::protobuf::Value> items);
// An object from (name, value) pairs; a repeated name keeps the last value.
google::protobuf::Struct JsonObjectOf(
    std::vector<std::pair<std::string, google::protobuf::Value>> fields);
google::protobuf::Value JsonObjectValue(google::protobuf::Struct object);

// A file's text: the object indented, keys sorted, a final newline.
std::string JsonText(const google::protobuf::Struct& object);

}  // namespace kforge::checkpoint

#endif  // KFORGE_MODEL_CHECKPOINT_JSON_FIELDS_H_
