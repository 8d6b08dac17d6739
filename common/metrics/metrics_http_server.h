// Serves a prometheus-cpp registry as `GET /metrics` (Prometheus text format
// 0.0.4) over plain HTTP/1.1 on one named thread.
//
// Why not prometheus-cpp's own Exposer: it runs on civetweb, which fails to
// start in processes that link PyTorch's LibTorch ("null context when
// constructing CivetServer", see shared/device/NOTES.md), and the learner and
// rollout worker link it. Scrapes are tiny and rare, so one thread that
// answers one request per connection is all that is needed.
//
//   auto server = MetricsHttpServer::Create("0.0.0.0", 0, registry);
//   (*server)->port();   // the port it got
#ifndef KFORGE_COMMON_METRICS_METRICS_HTTP_SERVER_H_
#define KFORGE_COMMON_METRICS_METRICS_HTTP_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "common/process/unique_fd.h"

namespace kforge {

class MetricsHttpServer {
 public:
  // Binds host:port (0 picks a free port) and starts serving.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Create(
      const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry);

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;
  // Stops the thread and closes the socket.
  ~MetricsHttpServer();

  int port() const { return port_; }

 private:
  MetricsHttpServer(UniqueFd listen_fd, UniqueFd wake_read, UniqueFd wake_write, int port,
                    std::shared_ptr<prometheus::Registry> registry);
  void Serve();
  void HandleConnection(int fd);

  UniqueFd listen_fd_;
  // Writing a byte to wake_write_ tells the serving thread to stop.
  UniqueFd wake_read_;
  UniqueFd wake_write_;
  int port_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::thread thread_;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_METRICS_METRICS_HTTP_SERVER_H_
