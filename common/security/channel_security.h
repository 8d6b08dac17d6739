// How a kforge client reaches a server: plaintext or TLS (verifying the
// server against a CA, presenting a client certificate for mutual TLS), and
// optionally a bearer token on every call. Cheap to copy; the credentials
// and token files are shared and re-read when they change.
//
//   KF_ASSIGN_OR_RETURN(ChannelSecurity security, ChannelSecurity::ForPeers(config.server()));
//   KF_RETURN_IF_ERROR(security.CheckTarget(config.learner_address(), "learner_address"));
//   auto stub = v1::LearnerService::NewStub(security.Connect(config.learner_address()));
#ifndef KFORGE_COMMON_SECURITY_CHANNEL_SECURITY_H_
#define KFORGE_COMMON_SECURITY_CHANNEL_SECURITY_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/security/token_set.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge {

// The host of a gRPC target: "localhost" for "localhost:50051",
// "kforge-verifier" for "dns:///kforge-verifier:50052", "::1" for "[::1]:1".
std::string TargetHost(absl::string_view target);

class ChannelSecurity {
 public:
  // Plaintext, no token.
  ChannelSecurity();

  // TLS when tls.ca_file is set (presenting tls.cert_file when set); a bearer
  // token from the first line of the first of `token_files` when given.
  static absl::StatusOr<ChannelSecurity> Create(const kforge::v1::TlsConfig& tls,
                                                std::vector<std::string> token_files,
                                                absl::Duration token_reload);

  // What a service process uses towards its peers: its server.tls (the same
  // certificate serves and, for mutual TLS, identifies it as a client) and
  // the first of its server.auth.service_token_files.
  static absl::StatusOr<ChannelSecurity> ForPeers(const kforge::v1::ServerConfig& server);

  // A bearer token goes over TLS, or over plaintext to loopback only.
  // `field` names the address's config field in the error.
  absl::Status CheckTarget(absl::string_view target, absl::string_view field) const;

  // `server_name`: the name the server's certificate must carry when the
  // target is an address (the dispatcher dials each verifier pod's IP);
  // tls.server_name, when set, wins.
  std::shared_ptr<grpc::Channel> Connect(const std::string& target,
                                         int64_t max_message_bytes = 64 << 20,
                                         const std::string& server_name = "") const;

  // The longest wait before a channel dials a peer that went away again
  // (RpcPolicy.backoff_max_s); unset: gRPC's default, up to 120 s.
  void set_reconnect_backoff_max(absl::Duration max) { reconnect_backoff_max_ = max; }

  bool tls() const { return tls_; }
  bool has_token() const { return token_ != nullptr; }
  // "plaintext", "TLS", "mutual TLS", each "+ token" when one is sent.
  std::string Describe() const;

 private:
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::shared_ptr<const TokenSet> token_;
  std::string server_name_;
  bool tls_ = false;
  bool client_certificate_ = false;
  absl::Duration reconnect_backoff_max_ = absl::ZeroDuration();
};

}  // namespace kforge

#endif  // KFORGE_COMMON_SECURITY_CHANNEL_SECURITY_H_
