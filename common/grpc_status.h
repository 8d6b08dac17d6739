// Conversion between absl::Status and grpc::Status. The canonical codes map
// one to one, so a library error surfaces to the RPC caller unchanged.
//
//   return kforge::ToGrpcStatus(registry.Cancel(id));
#ifndef KFORGE_COMMON_GRPC_STATUS_H_
#define KFORGE_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace kforge {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace kforge

#endif  // KFORGE_COMMON_GRPC_STATUS_H_
