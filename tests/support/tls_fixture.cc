#include "tests/support/tls_fixture.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/process/child_process.h"
#include "common/status_macros.h"

namespace kforge::testing {

absl::Status TestPki::Issue(const std::string& name, const std::vector<std::string>& names) const {
  std::vector<std::string> argv = {std::string(KFORGE_TEST_SOURCE_DIR) + "/deploy/tls/make-certs.sh",
                                   dir_, name};
  argv.insert(argv.end(), names.begin(), names.end());
  KF_ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> child,
                      ChildProcess::Spawn({.argv = argv, .capture_output = true}));
  KF_ASSIGN_OR_RETURN(ExitInfo exit, child->WaitFor(absl::Seconds(60)));
  if (!exit.exited || exit.code != 0) {
    return absl::InternalError(absl::StrCat("make-certs.sh ", name, ": ", child->output()));
  }
  return absl::OkStatus();
}

kforge::v1::TlsConfig TestPki::Tls(const std::string& name) const {
  kforge::v1::TlsConfig tls;
  tls.set_cert_file(cert(name));
  tls.set_key_file(key(name));
  tls.set_ca_file(ca());
  return tls;
}

std::string RandomToken() {
  std::random_device random;
  std::string token;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&token, absl::StrFormat("%08x", random()));
  return token;
}

}  // namespace kforge::testing
