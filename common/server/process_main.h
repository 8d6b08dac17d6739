// What the three service binaries share in main(): exit codes, and loading
// the process config from --config with --port / --metrics_port overrides.
//
//   kforge::v1::LearnerConfig config;
//   if (absl::Status s = LoadProcessConfig(absl::GetFlag(FLAGS_config), flags, &config,
//                                          "learner_config"); !s.ok()) {
//     log.Error("bad config", {{"error", s.ToString()}});
//     return kExitConfigError;
//   }
#ifndef KFORGE_COMMON_SERVER_PROCESS_MAIN_H_
#define KFORGE_COMMON_SERVER_PROCESS_MAIN_H_

#include <string>

#include "absl/status/status.h"
#include "common/config/json_config.h"
#include "common/security/tls_files.h"
#include "common/status_macros.h"

namespace kforge {

// Exit codes of kforge binaries.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeError = 1;  // failed while running
inline constexpr int kExitConfigError = 2;   // bad flags or config; nothing started

// Flag values that override the config file; negative means "not given".
struct ServerFlagOverrides {
  int port = -1;
  int metrics_port = -1;
  std::string host;
};

// Loads `path` (empty: all defaults) into `config`, whose message must have a
// `server` field of type ServerConfig, applies overrides, then defaults and
// range checks, and checks the TLS files server.tls names.
template <typename Config>
absl::Status LoadProcessConfig(const std::string& path, const ServerFlagOverrides& overrides,
                               Config* config, absl::string_view root_name) {
  config->Clear();
  if (!path.empty()) {
    KF_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    absl::Status parsed = ParseJsonMessage(text, config);
    if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", parsed.message()));
  }
  if (overrides.port >= 0) config->mutable_server()->set_port(overrides.port);
  if (overrides.metrics_port >= 0) config->mutable_server()->set_metrics_port(overrides.metrics_port);
  if (!overrides.host.empty()) config->mutable_server()->set_host(overrides.host);
  KF_RETURN_IF_ERROR(FinalizeConfig(config, root_name));
  return CheckTlsConfig(config->server().tls(), "server.tls").status();
}

}  // namespace kforge

#endif  // KFORGE_COMMON_SERVER_PROCESS_MAIN_H_
