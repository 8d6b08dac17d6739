// Who may call what on a kforge server. A service gets a CallGuard from the
// process's CallAuthorizer, and every handler (health and reflection are
// open and have none) starts with its check:
//
//   JobServiceImpl job_service(..., authorizer->UserGuard(v1::JobService::service_full_name()));
//   grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* context, ...) {
//     KF_AUTHORIZE(guard_.Check(*context));
//
// Users (JobService) present a bearer token from auth.job_token_files:
// none -> UNAUTHENTICATED, one not in the files -> PERMISSION_DENIED.
// Mesh peers (LearnerService, VerifierService) present a client certificate
// that the server's CA verified during the TLS handshake (mutual TLS), or a
// token from auth.service_token_files; a user's token is not enough.
//
// A class of caller with nothing configured is let in without credentials
// (the loopback development mesh); Create refuses that on any address but
// loopback unless auth.allow_unauthenticated says it is meant. When the
// server speaks TLS, calls that arrive in plaintext (its probe port) are
// refused whatever they carry.
//
// Tokens are never logged; refusals are counted in
// kforge_grpc_auth_refused_total{service,code}.
#ifndef KFORGE_COMMON_SECURITY_CALL_AUTH_H_
#define KFORGE_COMMON_SECURITY_CALL_AUTH_H_

#include <memory>
#include <string>

#include <grpcpp/server_context.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "common/security/token_set.h"
#include "kforge/v1/service_config.pb.h"

#define KF_AUTHORIZE(expr)                     \
  do {                                         \
    ::grpc::Status kf_auth_status_ = (expr);   \
    if (!kf_auth_status_.ok()) return kf_auth_status_; \
  } while (false)

namespace kforge {

// "127.0.0.1", "localhost", "::1": reachable from this host only.
bool IsLoopbackHost(absl::string_view host);

class CallAuthorizer;

// What one service requires of its callers. Default-constructed: nothing
// (for services driven in process, as tests do).
class CallGuard {
 public:
  CallGuard() = default;
  grpc::Status Check(const grpc::ServerContext& context) const;

 private:
  friend class CallAuthorizer;
  CallGuard(const CallAuthorizer* authorizer, std::string service, bool users)
      : authorizer_(authorizer), service_(std::move(service)), users_(users) {}

  const CallAuthorizer* authorizer_ = nullptr;  // not owned; outlives the guard
  std::string service_;
  bool users_ = false;
};

class CallAuthorizer {
 public:
  struct Options {
    kforge::v1::ServerConfig config;  // defaults applied, tls checked
    // Which classes of caller this server has services for (decides what
    // an unauthenticated non-loopback server would expose).
    bool serves_users = false;
    bool serves_peers = false;
    prometheus::Registry* registry = nullptr;  // optional
  };
  static absl::StatusOr<std::unique_ptr<CallAuthorizer>> Create(const Options& options);

  CallAuthorizer(const CallAuthorizer&) = delete;
  CallAuthorizer& operator=(const CallAuthorizer&) = delete;

  // Guards for a service of users (JobService) or of mesh peers
  // (LearnerService, VerifierService), by full service name.
  CallGuard UserGuard(std::string service) const { return CallGuard(this, std::move(service), true); }
  CallGuard PeerGuard(std::string service) const { return CallGuard(this, std::move(service), false); }

  grpc::Status AuthorizeUser(const grpc::ServerContext& context, absl::string_view service) const;
  grpc::Status AuthorizePeer(const grpc::ServerContext& context, absl::string_view service) const;

  // For the start-up log: what users and peers need ("bearer token (2)",
  // "client certificate or service token", "nothing (loopback)").
  std::string users_need() const;
  std::string peers_need() const;

 private:
  CallAuthorizer() = default;
  grpc::Status Refuse(absl::string_view service, grpc::StatusCode code, std::string message) const;
  grpc::Status RequireTransport(const grpc::ServerContext& context,
                                absl::string_view service) const;

  std::unique_ptr<TokenSet> job_tokens_;      // null: JobService open
  std::unique_ptr<TokenSet> service_tokens_;  // null: no service tokens
  bool tls_ = false;
  bool client_certs_ = false;  // the TLS handshake verifies client certificates
  prometheus::Family<prometheus::Counter>* refused_ = nullptr;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_SECURITY_CALL_AUTH_H_
