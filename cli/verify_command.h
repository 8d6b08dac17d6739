// `kforge verify --task TASK.py --candidate FILE [--json] [--server HOST:PORT]`:
// runs one candidate through the verifier funnel, in process (starting its
// own zygote and reference server) or on a remote verifier, and prints the
// stage table or the Verdict as JSON. Exit code 0 when the candidate is
// correct (and unflagged), 1 when it is not, 2 for bad arguments.
#ifndef KFORGE_CLI_VERIFY_COMMAND_H_
#define KFORGE_CLI_VERIFY_COMMAND_H_

#include <string>

#include "common/security/channel_security.h"

namespace kforge {

struct VerifyOptions {
  std::string task_file;
  std::string candidate_file;
  std::string server;        // empty: in process
  ChannelSecurity security;  // towards --server: a mesh peer's certificate or service token
  std::string options_file;  // VerifierOptions JSON; empty: defaults
  std::string python;
  std::string device = "cpu";
  bool require_triton = true;
  bool json = false;
};

int RunVerify(const VerifyOptions& options);

}  // namespace kforge

#endif  // KFORGE_CLI_VERIFY_COMMAND_H_
