#include "tests/support/service_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/client/rpc_client.h"
#include "common/config/json_config.h"
#include "common/process/unique_fd.h"
#include "common/status_macros.h"
#include "tests/support/fixtures.h"

namespace kforge::testing {

namespace fs = std::filesystem;

std::string ServiceProcess::address() const {
  return absl::StrCat("127.0.0.1:", ports.grpc_port());
}

std::string ServiceProcess::Log() const {
  absl::StatusOr<std::string> text = ReadFileToString(log_file);
  return text.ok() ? *text : "";
}

absl::StatusOr<ServiceProcess> StartServiceProcess(const std::string& binary,
                                                   std::vector<std::string> args,
                                                   const std::string& work_dir, bool wait_serving) {
  static int counter = 0;
  const std::string stem = absl::StrCat(binary, "-", ::getpid(), "-", counter++);
  const std::string port_file = (fs::path(work_dir) / (stem + ".ports")).string();
  ServiceProcess service;
  service.log_file = (fs::path(work_dir) / (stem + ".log")).string();
  std::vector<std::string> argv = {BinaryPath(binary), "--host=127.0.0.1", "--port=0",
                                   "--metrics_port=0", "--port_file=" + port_file};
  argv.insert(argv.end(), args.begin(), args.end());
  KF_ASSIGN_OR_RETURN(service.process,
                      ChildProcess::Spawn({.argv = argv, .log_file = service.log_file}));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!fs::exists(port_file)) {
    if (auto exit = service.process->Poll()) {
      return absl::UnavailableError(
          absl::StrCat(binary, " exited (", exit->Describe(), "): ", service.Log()));
    }
    if (absl::Now() > deadline) return absl::DeadlineExceededError(binary + " did not listen");
    absl::SleepFor(absl::Milliseconds(20));
  }
  KF_ASSIGN_OR_RETURN(std::string json, ReadFileToString(port_file));
  KF_RETURN_IF_ERROR(ParseJsonMessage(json, &service.ports));
  if (wait_serving) {
    KF_RETURN_IF_ERROR(WaitForServing(MakeChannel(service.address()), absl::Seconds(60)));
  }
  return service;
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("connect to port ", port));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: localhost\r\n\r\n");
  if (::send(fd.get(), request.data(), request.size(), 0) < 0) {
    return absl::UnavailableError("send failed");
  }
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd.get(), buffer, sizeof(buffer), 0)) > 0;) {
    response.append(buffer, static_cast<size_t>(n));
  }
  return response;
}

}  // namespace kforge::testing
