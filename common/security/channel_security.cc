#include "common/security/channel_security.h"

#include <algorithm>

#include <grpcpp/support/client_interceptor.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/security/call_auth.h"
#include "common/security/tls_files.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

// Adds "authorization: Bearer TOKEN" to every call. An interceptor rather
// than call credentials: gRPC sends call credentials over TLS only, and
// the loopback development mesh is plaintext.
class BearerInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerInterceptor(std::string header) : header_(std::move(header)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", header_});
    }
    methods->Proceed();
  }

 private:
  std::string header_;
};

class BearerInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerInterceptorFactory(std::shared_ptr<const TokenSet> token)
      : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    // Read per call, so a rotated token file is picked up.
    return new BearerInterceptor(absl::StrCat("Bearer ", token_->First()));
  }

 private:
  std::shared_ptr<const TokenSet> token_;
};

}  // namespace

std::string TargetHost(absl::string_view target) {
  // Scheme ("dns:///", "ipv4:", "ipv6:") off, then the port.
  if (size_t scheme = target.find(":///"); scheme != absl::string_view::npos) {
    target.remove_prefix(scheme + 4);
  } else if (absl::StartsWith(target, "ipv4:") || absl::StartsWith(target, "ipv6:")) {
    target.remove_prefix(5);
  }
  target = target.substr(0, target.find(','));
  if (absl::StartsWith(target, "[")) {
    const size_t end = target.find(']');
    return std::string(target.substr(1, end == absl::string_view::npos ? end : end - 1));
  }
  return std::string(target.substr(0, target.rfind(':')));
}

ChannelSecurity::ChannelSecurity() : credentials_(grpc::InsecureChannelCredentials()) {}

absl::StatusOr<ChannelSecurity> ChannelSecurity::Create(const v1::TlsConfig& tls,
                                                        std::vector<std::string> token_files,
                                                        absl::Duration token_reload) {
  ChannelSecurity security;
  if (DialsTls(tls)) {
    security.credentials_ = MakeChannelCredentials(tls);
    security.tls_ = true;
    security.client_certificate_ = !tls.cert_file().empty();
    security.server_name_ = tls.server_name();
  }
  if (!token_files.empty()) {
    KF_ASSIGN_OR_RETURN(std::unique_ptr<TokenSet> token,
                        TokenSet::Create(std::move(token_files), token_reload));
    security.token_ = std::move(token);
  }
  return security;
}

absl::StatusOr<ChannelSecurity> ChannelSecurity::ForPeers(const v1::ServerConfig& server) {
  absl::StatusOr<ChannelSecurity> security = Create(
      server.tls(),
      {server.auth().service_token_files().begin(), server.auth().service_token_files().end()},
      absl::Seconds(server.auth().reload_interval_s()));
  if (!security.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("server.auth.service_token_files: ", security.status().message()));
  }
  return security;
}

absl::Status ChannelSecurity::CheckTarget(absl::string_view target, absl::string_view field) const {
  if (token_ == nullptr || tls_) return absl::OkStatus();
  const std::string host = TargetHost(target);
  if (IsLoopbackHost(host)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": \"", target, "\" is not loopback, and a token must not travel in plaintext; "
      "give a CA file to speak TLS"));
}

std::shared_ptr<grpc::Channel> ChannelSecurity::Connect(const std::string& target,
                                                        int64_t max_message_bytes,
                                                        const std::string& server_name) const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(max_message_bytes));
  // Spread calls over every address a DNS name resolves to (headless
  // Services list one address per pod).
  args.SetLoadBalancingPolicyName("round_robin");
  if (reconnect_backoff_max_ > absl::ZeroDuration()) {
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(reconnect_backoff_max_));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, ms);
    // gRPC starts at 1 s; a cap below that is the whole schedule.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::min(ms, 1000));
  }
  const std::string& name = server_name_.empty() ? server_name : server_name_;
  if (tls_ && !name.empty()) args.SetSslTargetNameOverride(name);
  if (token_ == nullptr) return grpc::CreateCustomChannel(target, credentials_, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<BearerInterceptorFactory>(token_));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials_, args,
                                                                 std::move(interceptors));
}

std::string ChannelSecurity::Describe() const {
  std::string out = !tls_ ? "plaintext" : client_certificate_ ? "mutual TLS" : "TLS";
  if (token_ != nullptr) absl::StrAppend(&out, " + token");
  return out;
}

}  // namespace kforge
