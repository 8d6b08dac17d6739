#include "common/security/call_auth.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/security/tls_files.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

constexpr absl::string_view kBearer = "bearer ";

enum class Presented { kNone, kMalformed, kToken };

// The bearer token of the call, if any.
Presented BearerToken(const grpc::ServerContext& context, std::string* token) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return Presented::kNone;
  const absl::string_view value(it->second.data(), it->second.size());
  if (value.size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kBearer.size()), kBearer)) {
    return Presented::kMalformed;
  }
  *token = std::string(absl::StripAsciiWhitespace(value.substr(kBearer.size())));
  return Presented::kToken;
}

bool OverTls(const grpc::ServerContext& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return false;
  // TLS credentials report "tls", the older SSL credentials "ssl".
  for (const grpc::string_ref& type :
       auth->FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME)) {
    if (type == GRPC_TLS_TRANSPORT_SECURITY_TYPE || type == GRPC_SSL_TRANSPORT_SECURITY_TYPE) {
      return true;
    }
  }
  return false;
}

// A client certificate the handshake verified against the server's CA.
bool VerifiedClientCertificate(const grpc::ServerContext& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  return auth != nullptr && OverTls(context) && auth->IsPeerAuthenticated();
}

}  // namespace

bool IsLoopbackHost(absl::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" ||
         absl::StartsWith(host, "127.");
}

absl::StatusOr<std::unique_ptr<CallAuthorizer>> CallAuthorizer::Create(const Options& options) {
  const v1::ServerConfig& config = options.config;
  const v1::AuthConfig& auth = config.auth();
  std::unique_ptr<CallAuthorizer> authorizer(new CallAuthorizer());
  authorizer->tls_ = ServesTls(config.tls());
  authorizer->client_certs_ = VerifiesClientCertificates(config.tls());
  const absl::Duration reload = absl::Seconds(auth.reload_interval_s());
  if (auth.job_token_files_size() > 0) {
    absl::StatusOr<std::unique_ptr<TokenSet>> tokens = TokenSet::Create(
        {auth.job_token_files().begin(), auth.job_token_files().end()}, reload);
    if (!tokens.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("server.auth.job_token_files: ", tokens.status().message()));
    }
    authorizer->job_tokens_ = *std::move(tokens);
  }
  if (auth.service_token_files_size() > 0) {
    absl::StatusOr<std::unique_ptr<TokenSet>> tokens = TokenSet::Create(
        {auth.service_token_files().begin(), auth.service_token_files().end()}, reload);
    if (!tokens.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("server.auth.service_token_files: ", tokens.status().message()));
    }
    authorizer->service_tokens_ = *std::move(tokens);
  }
  // An open service on a reachable address is a mistake until said otherwise.
  if (!IsLoopbackHost(config.host()) && !auth.allow_unauthenticated()) {
    if (options.serves_users && authorizer->job_tokens_ == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "server.auth.job_token_files: JobService would accept anyone on ", config.host(),
          " (not loopback); give token files, listen on 127.0.0.1, or set "
          "server.auth.allow_unauthenticated"));
    }
    if (options.serves_peers && authorizer->service_tokens_ == nullptr &&
        !authorizer->client_certs_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "server.auth: the internal services would accept anyone on ", config.host(),
          " (not loopback); verify client certificates (server.tls with ca_file), give "
          "server.auth.service_token_files, listen on 127.0.0.1, or set "
          "server.auth.allow_unauthenticated"));
    }
  }
  if (options.registry != nullptr) {
    authorizer->refused_ = &prometheus::BuildCounter()
                                .Name("kforge_grpc_auth_refused_total")
                                .Help("Calls refused for missing or wrong credentials, by "
                                      "service and gRPC code.")
                                .Register(*options.registry);
  }
  return authorizer;
}

grpc::Status CallGuard::Check(const grpc::ServerContext& context) const {
  if (authorizer_ == nullptr) return grpc::Status::OK;
  return users_ ? authorizer_->AuthorizeUser(context, service_)
                : authorizer_->AuthorizePeer(context, service_);
}

grpc::Status CallAuthorizer::Refuse(absl::string_view service, grpc::StatusCode code,
                                    std::string message) const {
  if (refused_ != nullptr) {
    refused_->Add({{"service", std::string(service)},
                   {"code", code == grpc::StatusCode::UNAUTHENTICATED ? "UNAUTHENTICATED"
                                                                      : "PERMISSION_DENIED"}})
        .Increment();
  }
  return {code, std::move(message)};
}

grpc::Status CallAuthorizer::RequireTransport(const grpc::ServerContext& context,
                                              absl::string_view service) const {
  if (tls_ && !OverTls(context)) {
    return Refuse(service, grpc::StatusCode::UNAUTHENTICATED,
                  absl::StrCat(service,
                               " is served over TLS only; this plaintext port serves health "
                               "and reflection"));
  }
  return grpc::Status::OK;
}

grpc::Status CallAuthorizer::AuthorizeUser(const grpc::ServerContext& context,
                                           absl::string_view service) const {
  KF_AUTHORIZE(RequireTransport(context, service));
  if (job_tokens_ == nullptr) return grpc::Status::OK;
  std::string token;
  switch (BearerToken(context, &token)) {
    case Presented::kNone:
      return Refuse(service, grpc::StatusCode::UNAUTHENTICATED,
                    absl::StrCat(service,
                                 " needs a bearer token: send \"authorization: Bearer TOKEN\" "
                                 "(kforge --token_file FILE)"));
    case Presented::kMalformed:
      return Refuse(service, grpc::StatusCode::UNAUTHENTICATED,
                    "the authorization header is not \"Bearer TOKEN\"");
    case Presented::kToken:
      break;
  }
  if (!job_tokens_->Accepts(token)) {
    return Refuse(service, grpc::StatusCode::PERMISSION_DENIED,
                  absl::StrCat("the bearer token is not one that ", service,
                               " accepts"));
  }
  return grpc::Status::OK;
}

grpc::Status CallAuthorizer::AuthorizePeer(const grpc::ServerContext& context,
                                           absl::string_view service) const {
  KF_AUTHORIZE(RequireTransport(context, service));
  if (!client_certs_ && service_tokens_ == nullptr) return grpc::Status::OK;
  if (client_certs_ && VerifiedClientCertificate(context)) return grpc::Status::OK;
  std::string token;
  const Presented presented = BearerToken(context, &token);
  if (presented == Presented::kToken && service_tokens_ != nullptr &&
      service_tokens_->Accepts(token)) {
    return grpc::Status::OK;
  }
  const std::string need = client_certs_ && service_tokens_ != nullptr
                               ? "a client certificate from the mesh CA or a service token"
                           : client_certs_ ? "a client certificate from the mesh CA"
                                           : "a service token";
  if (presented == Presented::kNone) {
    return Refuse(service, grpc::StatusCode::UNAUTHENTICATED,
                  absl::StrCat(service, " serves the mesh's own services only: it needs ",
                               need));
  }
  return Refuse(service, grpc::StatusCode::PERMISSION_DENIED,
                absl::StrCat(service, " serves the mesh's own services only; the token "
                             "presented is not a service token (it needs ", need, ")"));
}

std::string CallAuthorizer::users_need() const {
  if (job_tokens_ == nullptr) return "nothing (open)";
  return absl::StrCat("a bearer token (", job_tokens_->size(), " accepted)");
}

std::string CallAuthorizer::peers_need() const {
  if (client_certs_ && service_tokens_ != nullptr) return "client certificate or service token";
  if (client_certs_) return "client certificate";
  if (service_tokens_ != nullptr) return "service token";
  return "nothing (open)";
}

}  // namespace kforge
