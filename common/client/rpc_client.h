// Outgoing calls the way kforge makes them: every call has a deadline, and
// idempotent calls are retried with exponential back-off on transient codes,
// all from the RpcPolicy in the process's config.
//
//   auto channel = MakeChannel("localhost:50051");
//   grpc::Status s = CallWithRetry(policy, [&](grpc::ClientContext& ctx) {
//     return stub->Heartbeat(&ctx, request, &response);
//   });
#ifndef KFORGE_COMMON_CLIENT_RPC_CLIENT_H_
#define KFORGE_COMMON_CLIENT_RPC_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge {

// A plaintext channel with kforge's message-size limit (ChannelSecurity in
// common/security/channel_security.h makes TLS ones and adds tokens). `target` is
// "host:port" or any gRPC target ("dns:///name:port").
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           int64_t max_message_bytes = 64 << 20);

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout);

// True for codes worth another attempt of an idempotent call.
bool IsTransient(grpc::StatusCode code);

// Runs `call` with a fresh context carrying policy.deadline_s until it
// succeeds, fails with a non-transient code, or policy.max_attempts is
// reached. Returns the last status.
grpc::Status CallWithRetry(const kforge::v1::RpcPolicy& policy,
                           const std::function<grpc::Status(grpc::ClientContext&)>& call);

// Polls grpc.health.v1 Check on `channel` until it answers SERVING or
// `timeout` passes. `service` "" is the whole server.
absl::Status WaitForServing(const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout,
                            const std::string& service = "");

}  // namespace kforge

#endif  // KFORGE_COMMON_CLIENT_RPC_CLIENT_H_
