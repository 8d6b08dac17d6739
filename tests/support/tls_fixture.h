// Certificates and tokens made at test time, with the same openssl script
// operators use (deploy/tls/make-certs.sh), for tests over real TLS.
//
//   testing::TestPki pki(dir.Sub("pki"));
//   ASSERT_TRUE(pki.Issue("server", {"localhost", "127.0.0.1"}).ok());
//   pki.cert("server"), pki.key("server"), pki.ca()
#ifndef KFORGE_TESTS_SUPPORT_TLS_FIXTURE_H_
#define KFORGE_TESTS_SUPPORT_TLS_FIXTURE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge::testing {

class TestPki {
 public:
  // A CA of its own in `dir`, made on the first Issue.
  explicit TestPki(std::string dir) : dir_(std::move(dir)) {}

  // NAME.crt / NAME.key signed by this CA, for NAME and `names` (DNS names
  // or IPv4 addresses).
  absl::Status Issue(const std::string& name, const std::vector<std::string>& names = {}) const;

  std::string ca() const { return dir_ + "/ca.crt"; }
  std::string cert(const std::string& name) const { return dir_ + "/" + name + ".crt"; }
  std::string key(const std::string& name) const { return dir_ + "/" + name + ".key"; }
  // cert_file, key_file and ca_file of `name`.
  kforge::v1::TlsConfig Tls(const std::string& name) const;

 private:
  std::string dir_;
};

// A random token of 32 hex characters.
std::string RandomToken();

}  // namespace kforge::testing

#endif  // KFORGE_TESTS_SUPPORT_TLS_FIXTURE_H_
