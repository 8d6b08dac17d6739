#include "common/client/rpc_client.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/client/backoff.h"
#include "common/security/channel_security.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace kforge {

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, int64_t max_message_bytes) {
  return ChannelSecurity().Connect(target, max_message_bytes);
}

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

bool IsTransient(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED || code == grpc::StatusCode::ABORTED;
}

grpc::Status CallWithRetry(const kforge::v1::RpcPolicy& policy,
                           const std::function<grpc::Status(grpc::ClientContext&)>& call) {
  Backoff backoff(policy);
  grpc::Status status;
  for (int attempt = 1; attempt <= policy.max_attempts(); ++attempt) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(policy.deadline_s()));
    status = call(context);
    if (status.ok() || !IsTransient(status.error_code())) return status;
    if (attempt == policy.max_attempts()) break;
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(backoff.Next()));
  }
  return status;
}

absl::Status WaitForServing(const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout,
                            const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  const absl::Time deadline = absl::Now() + timeout;
  std::string last = "no answer";
  while (absl::Now() < deadline) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(2));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = stub->Check(&context, request, &response);
    if (status.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::OkStatus();
    }
    last = status.ok() ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())
                       : status.error_message();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("not SERVING after ", absl::FormatDuration(timeout), " (last: ", last, ")"));
}

}  // namespace kforge
