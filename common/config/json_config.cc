#include "common/config/json_config.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver_util.h>

#include "absl/strings/str_cat.h"
#include "common/config/proto_defaults.h"
#include "common/config/proto_validation.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

constexpr const char* kTypeUrlPrefix = "type.googleapis.com";

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    std::string reason = std::strerror(err);
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": ", reason));
    if (err == EACCES) return absl::PermissionDeniedError(absl::StrCat(path, ": ", reason));
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open: ", reason));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return buffer.str();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::PermissionDeniedError(
          absl::StrCat(tmp, ": cannot write: ", std::strerror(errno)));
    }
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) return absl::DataLossError(absl::StrCat(tmp, ": write failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("rename ", tmp, " -> ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ParseJsonMessage(absl::string_view json, google::protobuf::Message* message) {
  message->Clear();
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid ", message->GetDescriptor()->name(), " JSON: ", status.message().as_string()));
  }
  return absl::OkStatus();
}

std::string ToJson(const google::protobuf::Message& message, bool multiline) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = multiline;
  options.preserve_proto_field_names = true;
  std::string out;
  const google::protobuf::DescriptorPool* pool = message.GetDescriptor()->file()->pool();
  if (pool != google::protobuf::DescriptorPool::generated_pool()) {
    // Printing a valid message cannot fail.
    (void)google::protobuf::util::MessageToJsonString(message, &out, options);
    return out;
  }
  // MessageToJsonString prints a map (a Struct's keys, a proto map field) in
  // hash order, which changes from run to run; a deterministic serialisation
  // sorts map keys, so the same message always prints the same text.
  std::string binary;
  {
    google::protobuf::io::StringOutputStream stream(&binary);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  static google::protobuf::util::TypeResolver* const resolver =
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          kTypeUrlPrefix, google::protobuf::DescriptorPool::generated_pool());
  (void)google::protobuf::util::BinaryToJsonString(
      resolver, absl::StrCat(kTypeUrlPrefix, "/", message.GetDescriptor()->full_name()), binary,
      &out, options);
  return out;
}

absl::Status FinalizeConfig(google::protobuf::Message* message, absl::string_view root_name) {
  KF_RETURN_IF_ERROR(ApplyProtoDefaults(message));
  return ValidateProtoFields(*message, root_name);
}

absl::Status LoadConfigFile(const std::string& path, google::protobuf::Message* message,
                            absl::string_view root_name) {
  message->Clear();
  if (!path.empty()) {
    KF_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    absl::Status parsed = ParseJsonMessage(text, message);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", parsed.message()));
    }
  }
  return FinalizeConfig(message, root_name);
}

}  // namespace kforge
