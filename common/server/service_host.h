// Hosts a process's gRPC services the way every kforge server must: server
// reflection, the standard grpc.health.v1 service (NOT_SERVING until the
// owner says it is ready), per-call metrics, /metrics over HTTP, bounded
// message sizes and threads, and a graceful drain. The gRPC port speaks TLS
// when config.tls names a certificate (checked here, at the edge), and an
// optional plaintext probe port (config.probe_port) answers health and
// reflection for probes that cannot speak TLS; the start-up log says which.
//
//   auto host = ServiceHost::Create({.config = config.server(),
//                                    .component = "learner",
//                                    .services = {&job_service},
//                                    .service_names = {"kforge.v1.JobService"},
//                                    .registry = registry});
//   ...load the model...
//   (*host)->SetServing(true);
//   WaitForTerminationSignal();
//   (*host)->Shutdown();   // NOT_SERVING, drain, then stop
#ifndef KFORGE_COMMON_SERVER_SERVICE_HOST_H_
#define KFORGE_COMMON_SERVER_SERVICE_HOST_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "common/logging/logger.h"
#include "common/metrics/metrics_http_server.h"
#include "common/security/tls_files.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge {

struct ServiceHostOptions {
  kforge::v1::ServerConfig config;  // defaults already applied
  std::string component;            // "learner", "rollout_worker", "verifier_worker"
  // Not owned; must outlive the host.
  std::vector<grpc::Service*> services;
  // Full names of those services ("kforge.v1.JobService"), for per-service
  // health checks.
  std::vector<std::string> service_names;
  std::shared_ptr<prometheus::Registry> registry;
  // When set, the chosen ports are written here as a ServingPorts JSON.
  std::string port_file;
};

class ServiceHost {
 public:
  static absl::StatusOr<std::unique_ptr<ServiceHost>> Create(ServiceHostOptions options);

  ServiceHost(const ServiceHost&) = delete;
  ServiceHost& operator=(const ServiceHost&) = delete;
  ~ServiceHost();

  int grpc_port() const { return grpc_port_; }
  int probe_port() const { return probe_port_; }
  int metrics_port() const { return metrics_->port(); }

  // Health of the whole server and of each hosted service; also exported as
  // the kforge_ready gauge.
  void SetServing(bool serving);

  // Health goes NOT_SERVING, new calls are refused, calls in flight get
  // config.drain_timeout_s to finish, then are cancelled. Idempotent.
  void Shutdown();

 private:
  ServiceHost(ServiceHostOptions options, std::unique_ptr<grpc::Server> server, int grpc_port,
              std::unique_ptr<grpc::Server> probe_server, int probe_port,
              std::unique_ptr<MetricsHttpServer> metrics);

  void LogTransport(const TlsSummary& tls) const;

  ServiceHostOptions options_;
  Logger log_;
  std::unique_ptr<grpc::Server> server_;
  int grpc_port_;
  std::unique_ptr<grpc::Server> probe_server_;  // null without a probe port
  int probe_port_;
  std::unique_ptr<MetricsHttpServer> metrics_;
  prometheus::Gauge* ready_gauge_;
  bool shut_down_ = false;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_SERVER_SERVICE_HOST_H_
