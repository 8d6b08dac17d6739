#include "tests/support/reflection_client.h"

#include <google/protobuf/descriptor.pb.h>

#include "common/client/rpc_client.h"
#include "common/grpc_status.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace kforge::testing {
namespace {

using grpc::reflection::v1alpha::ServerReflection;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;

absl::StatusOr<ServerReflectionResponse> Ask(const std::shared_ptr<grpc::Channel>& channel,
                                             const ServerReflectionRequest& request) {
  auto stub = ServerReflection::NewStub(channel);
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(10));
  auto stream = stub->ServerReflectionInfo(&context);
  ServerReflectionResponse response;
  if (!stream->Write(request) || !stream->WritesDone() || !stream->Read(&response)) {
    return FromGrpcStatus(stream->Finish());
  }
  ServerReflectionResponse extra;
  while (stream->Read(&extra)) {
  }
  if (grpc::Status s = stream->Finish(); !s.ok()) return FromGrpcStatus(s);
  if (response.has_error_response()) {
    return absl::NotFoundError(response.error_response().error_message());
  }
  return response;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListServices(
    const std::shared_ptr<grpc::Channel>& channel) {
  ServerReflectionRequest request;
  request.set_list_services("*");
  absl::StatusOr<ServerReflectionResponse> response = Ask(channel, request);
  if (!response.ok()) return response.status();
  std::vector<std::string> names;
  for (const auto& service : response->list_services_response().service()) {
    names.push_back(service.name());
  }
  return names;
}

absl::StatusOr<std::vector<std::string>> FilesContainingSymbol(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& symbol) {
  ServerReflectionRequest request;
  request.set_file_containing_symbol(symbol);
  absl::StatusOr<ServerReflectionResponse> response = Ask(channel, request);
  if (!response.ok()) return response.status();
  std::vector<std::string> files;
  for (const std::string& bytes : response->file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    if (!file.ParseFromString(bytes)) return absl::DataLossError("bad FileDescriptorProto");
    files.push_back(file.name());
  }
  return files;
}

}  // namespace kforge::testing
