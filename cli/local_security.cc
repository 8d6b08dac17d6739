#include "cli/local_security.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "common/security/tls_files.h"
#include "common/status_macros.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// The learner asks for client certificates without requiring them (users
// come with tokens); the verifier and rollout worker serve the mesh only.
v1::ServerConfig ServerFor(const std::string& service, const v1::TlsConfig& tls,
                           const std::string& token_file) {
  v1::ServerConfig server;
  *server.mutable_tls() = tls;
  server.mutable_tls()->set_client_certs(service == "learner" ? "optional" : "require");
  if (service == "learner" && !token_file.empty()) {
    server.mutable_auth()->add_job_token_files(token_file);
  }
  return server;
}

template <typename Config>
absl::Status WriteServiceConfig(const std::string& file, const v1::ServerConfig& server) {
  Config config;
  *config.mutable_server() = server;
  return WriteFileAtomically(file, ToJson(config));
}

}  // namespace

absl::StatusOr<LocalSecurity> LocalSecurity::Prepare(const std::string& run_dir,
                                                     const std::string& tls_dir,
                                                     const std::string& token_file) {
  LocalSecurity security;
  if (tls_dir.empty()) {
    if (!token_file.empty()) {
      // Plaintext tokens are allowed on loopback; it still protects
      // JobService from the machine's other users.
      KF_ASSIGN_OR_RETURN(security.users_,
                          ChannelSecurity::Create(v1::TlsConfig(), {token_file}, absl::Seconds(10)));
      security.token_file_ = fs::absolute(token_file).string();
      v1::ServerConfig server;
      server.mutable_auth()->add_job_token_files(security.token_file_);
      const std::string file = (fs::path(run_dir) / "learner.json").string();
      KF_RETURN_IF_ERROR(WriteServiceConfig<v1::LearnerConfig>(file, server));
      security.config_files_.push_back({"learner", file});
    }
    return security;
  }
  const fs::path dir = fs::absolute(tls_dir);
  v1::TlsConfig tls;
  tls.set_cert_file((dir / "local.crt").string());
  tls.set_key_file((dir / "local.key").string());
  tls.set_ca_file((dir / "ca.crt").string());
  tls.set_client_certs("require");
  tls.set_reload_interval_s(60);
  if (absl::Status checked = CheckTlsConfig(tls, "--tls_dir").status(); !checked.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        checked.message(), " (write it with: deploy/tls/make-certs.sh ", tls_dir,
        " local localhost 127.0.0.1)"));
  }
  security.tls_ = true;
  security.ca_file_ = tls.ca_file();
  security.token_file_ = token_file.empty() ? "" : fs::absolute(token_file).string();
  // kforge local's own clients are mesh members: they present the
  // certificate too (the learner asks for one but needs only the token).
  KF_ASSIGN_OR_RETURN(security.health_, ChannelSecurity::Create(tls, {}, absl::Seconds(10)));
  std::vector<std::string> tokens;
  if (!token_file.empty()) tokens.push_back(security.token_file_);
  KF_ASSIGN_OR_RETURN(security.users_, ChannelSecurity::Create(tls, tokens, absl::Seconds(10)));
  for (const std::string service : {"learner", "verifier", "rollout"}) {
    const std::string file = (fs::path(run_dir) / (service + ".json")).string();
    const v1::ServerConfig server = ServerFor(service, tls, security.token_file_);
    if (service == "learner") {
      KF_RETURN_IF_ERROR(WriteServiceConfig<v1::LearnerConfig>(file, server));
    } else if (service == "verifier") {
      KF_RETURN_IF_ERROR(WriteServiceConfig<v1::VerifierWorkerConfig>(file, server));
    } else {
      KF_RETURN_IF_ERROR(WriteServiceConfig<v1::RolloutWorkerConfig>(file, server));
    }
    security.config_files_.push_back({service, file});
  }
  return security;
}

std::vector<std::string> LocalSecurity::ServiceArgs(const std::string& service) const {
  for (const auto& [name, file] : config_files_) {
    if (name == service) return {absl::StrCat("--config=", file)};
  }
  return {};
}

std::string LocalSecurity::Describe() const {
  if (!tls_) {
    return absl::StrCat(
        "plaintext gRPC on 127.0.0.1 (loopback only), ",
        token_file_.empty() ? "JobService open to this machine's users"
                            : "JobService wants a token from " + token_file_,
        "; --tls_dir DIR for TLS between the services (README \"Security\")");
  }
  return absl::StrCat("TLS on 127.0.0.1 with mutual TLS between the services (CA ", ca_file_, "), ",
                      token_file_.empty() ? "JobService open to this machine's users"
                                          : "JobService wants a token from " + token_file_);
}

std::string LocalSecurity::CliFlags() const {
  std::string flags;
  if (tls_) absl::StrAppend(&flags, " --ca_file ", ca_file_);
  if (!token_file_.empty()) absl::StrAppend(&flags, " --token_file ", token_file_);
  return flags;
}

std::string LocalSecurity::GrpcurlFlags() const {
  std::string flags = tls_ ? absl::StrCat("-cacert ", ca_file_) : "-plaintext";
  if (!token_file_.empty()) {
    absl::StrAppend(&flags, " -H \"authorization: Bearer $(head -1 ", token_file_, ")\"");
  }
  return flags;
}

}  // namespace kforge
