// Transport security from a TlsConfig's PEM files: the checks made once at
// the edge (files readable, certificate and key a pair, CA parsable) and the
// gRPC credentials built on them. The credentials re-read the files every
// tls.reload_interval_s (gRPC's file-watcher provider), so a renewed
// certificate, key or CA applies to new connections without a restart.
//
//   KF_ASSIGN_OR_RETURN(TlsSummary summary, CheckTlsConfig(config.tls(), "server.tls"));
//   builder.AddListeningPort(address, MakeServerCredentials(config.tls()), &port);
#ifndef KFORGE_COMMON_SECURITY_TLS_FILES_H_
#define KFORGE_COMMON_SECURITY_TLS_FILES_H_

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge {

// What the start-up log says about a process's certificate.
struct TlsSummary {
  std::string subject;    // "CN=kforge-learner"
  std::string names;      // subjectAltName entries: "DNS:kforge-learner, IP:127.0.0.1"
  std::string not_after;  // "Nov 25 21:00:00 2027 GMT"
  bool expired = false;
  int ca_certificates = 0;
};

// A server serves TLS when cert_file is set; a client speaks TLS when
// ca_file is set (and presents cert_file when that is set too).
inline bool ServesTls(const kforge::v1::TlsConfig& tls) { return !tls.cert_file().empty(); }
inline bool DialsTls(const kforge::v1::TlsConfig& tls) { return !tls.ca_file().empty(); }
// The server verifies client certificates (mutual TLS).
bool VerifiesClientCertificates(const kforge::v1::TlsConfig& tls);

// Checks the fields and the files they name; errors name the field
// (`field` is its path, "server.tls") and the file.
absl::StatusOr<TlsSummary> CheckTlsConfig(const kforge::v1::TlsConfig& tls,
                                          absl::string_view field);

// Plaintext credentials when the config says so. Call CheckTlsConfig first.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const kforge::v1::TlsConfig& tls);
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const kforge::v1::TlsConfig& tls);

}  // namespace kforge

#endif  // KFORGE_COMMON_SECURITY_TLS_FILES_H_
