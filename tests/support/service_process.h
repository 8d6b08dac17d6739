// Starts one kforge service binary as a child process on loopback with free
// ports, and waits until it listens (and, optionally, reports SERVING).
//
//   auto learner = StartServiceProcess("kforge-learner", {"--state_dir=" + dir});
//   auto stub = kforge::v1::JobService::NewStub(MakeChannel(learner->address()));
#ifndef KFORGE_TESTS_SUPPORT_SERVICE_PROCESS_H_
#define KFORGE_TESTS_SUPPORT_SERVICE_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/process/child_process.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge::testing {

struct ServiceProcess {
  std::unique_ptr<ChildProcess> process;
  kforge::v1::ServingPorts ports;
  std::string log_file;
  std::string address() const;
  std::string Log() const;  // what the service has logged so far
};

// `work_dir` holds the port file and log. Waits up to 60 s.
absl::StatusOr<ServiceProcess> StartServiceProcess(const std::string& binary,
                                                   std::vector<std::string> args,
                                                   const std::string& work_dir,
                                                   bool wait_serving = true);

// GET http://127.0.0.1:port/path; returns status line + body.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

}  // namespace kforge::testing

#endif  // KFORGE_TESTS_SUPPORT_SERVICE_PROCESS_H_
