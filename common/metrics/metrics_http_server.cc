#include "common/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <prometheus/text_serializer.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

// A request line plus headers larger than this is refused; scrapers send a
// few hundred bytes.
constexpr size_t kMaxRequestBytes = 16 * 1024;
// A client that does not finish its request within this is dropped, so a
// stuck connection cannot hold the single serving thread.
constexpr int kRequestTimeoutMs = 5000;

absl::Status ErrnoError(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

std::string Response(absl::string_view status, absl::string_view content_type,
                     absl::string_view body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Create(
    const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* resolved = nullptr;
  const std::string port_text = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &resolved); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address ", host, ":", port, ": ", ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(resolved, ::freeaddrinfo);
  UniqueFd fd(::socket(resolved->ai_family, resolved->ai_socktype | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError("metrics socket");
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), resolved->ai_addr, resolved->ai_addrlen) != 0) {
    return ErrnoError(absl::StrCat("bind metrics port ", host, ":", port));
  }
  if (::listen(fd.get(), 64) != 0) return ErrnoError("listen on metrics port");
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoError("metrics wake pipe");
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(std::move(fd), UniqueFd(pipe_fds[0]), UniqueFd(pipe_fds[1]),
                            bound_port, std::move(registry)));
}

MetricsHttpServer::MetricsHttpServer(UniqueFd listen_fd, UniqueFd wake_read, UniqueFd wake_write,
                                     int port, std::shared_ptr<prometheus::Registry> registry)
    : listen_fd_(std::move(listen_fd)),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)),
      port_(port),
      registry_(std::move(registry)),
      thread_([this] {
        pthread_setname_np(pthread_self(), "kf-metrics-http");
        Serve();
      }) {}

MetricsHttpServer::~MetricsHttpServer() {
  const char byte = 0;
  ssize_t ignored = ::write(wake_write_.get(), &byte, 1);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
}

void MetricsHttpServer::Serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    UniqueFd client(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (client) HandleConnection(client.get());
  }
}

void MetricsHttpServer::HandleConnection(int fd) {
  std::string request;
  char buffer[4096];
  while (!absl::StrContains(request, "\r\n\r\n") && request.size() < kMaxRequestBytes) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, kRequestTimeoutMs) <= 0) return;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return;
    request.append(buffer, static_cast<size_t>(n));
  }
  const size_t line_end = request.find("\r\n");
  const absl::string_view line = absl::string_view(request).substr(0, line_end);
  if (!absl::StartsWith(line, "GET ") && !absl::StartsWith(line, "HEAD ")) {
    WriteAll(fd, Response("405 Method Not Allowed", "text/plain", "only GET is served\n"));
    return;
  }
  const size_t path_start = line.find(' ') + 1;
  const absl::string_view path = line.substr(path_start, line.find(' ', path_start) - path_start);
  if (path != "/metrics" && !absl::StartsWith(path, "/metrics?")) {
    WriteAll(fd, Response("404 Not Found", "text/plain", "metrics are at /metrics\n"));
    return;
  }
  const std::string body = prometheus::TextSerializer().Serialize(registry_->Collect());
  WriteAll(fd, Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body));
}

}  // namespace kforge
