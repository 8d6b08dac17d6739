// How `kforge local` secures its mesh. By default: plaintext gRPC on
// 127.0.0.1 and no tokens, which only this machine's users can reach, said
// so at start-up. With --tls_dir DIR (DIR/ca.crt and a certificate for the
// loopback names, DIR/local.crt and DIR/local.key, as
// `deploy/tls/make-certs.sh DIR local localhost 127.0.0.1` writes them):
// every service serves TLS and the services verify each other's
// certificates (mutual TLS); with --token_file FILE JobService also wants
// one of FILE's tokens. Each service then gets a config file in the run
// folder (learner.json, verifier.json, rollout.json).
//
//   KF_ASSIGN_OR_RETURN(LocalSecurity security, LocalSecurity::Prepare(options));
//   args += security.ServiceArgs("learner");
//   auto channel = security.peers().Connect(address);   // health checks
//   auto jobs = security.users().Connect(address);      // JobService calls
#ifndef KFORGE_CLI_LOCAL_SECURITY_H_
#define KFORGE_CLI_LOCAL_SECURITY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/security/channel_security.h"

namespace kforge {

class LocalSecurity {
 public:
  // `tls_dir` and `token_file` may be empty; config files go to `run_dir`.
  static absl::StatusOr<LocalSecurity> Prepare(const std::string& run_dir,
                                               const std::string& tls_dir,
                                               const std::string& token_file);

  // Extra arguments of a service ("learner", "verifier", "rollout").
  std::vector<std::string> ServiceArgs(const std::string& service) const;
  // Health checks (no token) and JobService calls (the token).
  const ChannelSecurity& health() const { return health_; }
  const ChannelSecurity& users() const { return users_; }
  // One line for the start-up banner.
  std::string Describe() const;
  // grpcurl's flags for the banner ("-plaintext" or "-cacert DIR/ca.crt
  // -H 'authorization: Bearer ...'").
  std::string GrpcurlFlags() const;
  // The same for the kforge CLI (" --ca_file ... --token_file ...").
  std::string CliFlags() const;

 private:
  bool tls_ = false;
  std::string token_file_;
  std::string ca_file_;
  std::vector<std::pair<std::string, std::string>> config_files_;  // service, file
  ChannelSecurity health_;
  ChannelSecurity users_;
};

}  // namespace kforge

#endif  // KFORGE_CLI_LOCAL_SECURITY_H_
