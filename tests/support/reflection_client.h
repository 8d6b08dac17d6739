// What `grpcurl list` and `grpcurl describe` do, over the server reflection
// protocol, for tests.
#ifndef KFORGE_TESTS_SUPPORT_REFLECTION_CLIENT_H_
#define KFORGE_TESTS_SUPPORT_REFLECTION_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace kforge::testing {

absl::StatusOr<std::vector<std::string>> ListServices(const std::shared_ptr<grpc::Channel>& channel);

// Names of the proto files the server returns for `symbol` (the file that
// defines it first, then its dependencies).
absl::StatusOr<std::vector<std::string>> FilesContainingSymbol(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& symbol);

}  // namespace kforge::testing

#endif  // KFORGE_TESTS_SUPPORT_REFLECTION_CLIENT_H_
