// The JobService client commands: `kforge submit FILE.json`, `kforge jobs`,
// `kforge watch JOB`, `kforge cancel JOB`. Each call has a deadline; errors
// print the server's message (which names the offending field) and exit
// non-zero.
#ifndef KFORGE_CLI_JOB_COMMANDS_H_
#define KFORGE_CLI_JOB_COMMANDS_H_

#include <string>

#include "common/security/channel_security.h"

namespace kforge {

struct ClientOptions {
  std::string server = "localhost:50051";
  double deadline_s = 30;
  bool json = false;  // print protobuf JSON instead of tables
  // Plaintext, or TLS against --ca_file, with the --token_file bearer token.
  ChannelSecurity security;
};

int SubmitJob(const ClientOptions& options, const std::string& spec_file);
int ListJobs(const ClientOptions& options);
int WatchJob(const ClientOptions& options, const std::string& job_id);
int CancelJob(const ClientOptions& options, const std::string& job_id);
// `kforge health [SERVICE]`: grpc.health.v1 Check; exit 0 when SERVING.
int CheckHealth(const ClientOptions& options, const std::string& service);

}  // namespace kforge

#endif  // KFORGE_CLI_JOB_COMMANDS_H_
