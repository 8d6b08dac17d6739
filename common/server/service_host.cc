#include "common/server/service_host.h"

#include <unistd.h>

#include <chrono>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>

#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "common/metrics/grpc_metrics_interceptor.h"
#include "common/security/tls_files.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

void RegisterBuildInfo(prometheus::Registry& registry, const std::string& component) {
  prometheus::BuildGauge()
      .Name("kforge_build_info")
      .Help("Always 1; labels carry the kforge version and the process's component.")
      .Register(registry)
      .Add({{"version", KFORGE_VERSION}, {"component", component}})
      .Set(1);
  prometheus::BuildGauge()
      .Name("kforge_process_start_time_seconds")
      .Help("Start time of the process since the Unix epoch.")
      .Register(registry)
      .Add({})
      .Set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
               .count());
}

// The plaintext probe port: only the health service (and reflection, which
// the plugin adds to every server) is registered on it.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartProbeServer(const kforge::v1::ServerConfig& config,
                                                               int* port) {
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(config.host(), ":", config.probe_port());
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  grpc::ResourceQuota quota("kforge-probe");
  quota.SetMaxThreads(4);
  builder.SetResourceQuota(quota);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for probes on ", address,
                                               " (address in use or not permitted)"));
  }
  server->GetHealthCheckService()->SetServingStatus(false);
  return server;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServiceHost>> ServiceHost::Create(ServiceHostOptions options) {
  const kforge::v1::ServerConfig& config = options.config;
  KF_ASSIGN_OR_RETURN(TlsSummary tls, CheckTlsConfig(config.tls(), "server.tls"));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  int grpc_port = 0;
  const std::string address = absl::StrCat(config.host(), ":", config.port());
  builder.AddListeningPort(address, MakeServerCredentials(config.tls()), &grpc_port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes()));
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes()));
  grpc::ResourceQuota quota(absl::StrCat("kforge-", options.component));
  quota.SetMaxThreads(config.max_rpc_threads());
  builder.SetResourceQuota(quota);
  for (grpc::Service* service : options.services) builder.RegisterService(service);

  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<GrpcMetricsInterceptorFactory>(*options.registry));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));

  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", address,
                                               " (address in use or not permitted)"));
  }
  // Not ready until the owner says so (model loaded, sandbox warm, ...).
  server->GetHealthCheckService()->SetServingStatus(false);
  std::unique_ptr<grpc::Server> probe_server;
  int probe_port = 0;
  if (config.has_probe_port()) {
    KF_ASSIGN_OR_RETURN(probe_server, StartProbeServer(config, &probe_port));
  }

  RegisterBuildInfo(*options.registry, options.component);
  KF_ASSIGN_OR_RETURN(
      std::unique_ptr<MetricsHttpServer> metrics,
      MetricsHttpServer::Create(config.host(), config.metrics_port(), options.registry));

  if (!options.port_file.empty()) {
    kforge::v1::ServingPorts ports;
    ports.set_grpc_port(grpc_port);
    ports.set_metrics_port(metrics->port());
    ports.set_pid(static_cast<int>(::getpid()));
    ports.set_probe_port(probe_port);
    KF_RETURN_IF_ERROR(WriteFileAtomically(options.port_file, ToJson(ports, false)));
  }
  auto host = std::unique_ptr<ServiceHost>(new ServiceHost(std::move(options), std::move(server),
                                                           grpc_port, std::move(probe_server),
                                                           probe_port, std::move(metrics)));
  host->LogTransport(tls);
  return host;
}

void ServiceHost::LogTransport(const TlsSummary& tls) const {
  const kforge::v1::TlsConfig& config = options_.config.tls();
  if (!ServesTls(config)) {
    // Said at every start: plaintext is for loopback development.
    log_.Warning("serving plaintext gRPC (no server.tls.cert_file): traffic and tokens are "
                 "readable by anyone on the path; for loopback development only",
                 {{"host", options_.config.host()}});
    return;
  }
  log_.Info("serving TLS", {{"certificate", tls.subject},
                            {"names", tls.names},
                            {"not_after", tls.not_after},
                            {"client_certs", VerifiesClientCertificates(config)
                                                 ? config.client_certs() : "none"},
                            {"reload_interval_s", config.reload_interval_s()}});
  if (tls.expired) {
    log_.Warning("the server certificate has expired; clients will refuse it",
                 {{"cert_file", config.cert_file()}, {"not_after", tls.not_after}});
  }
}

ServiceHost::ServiceHost(ServiceHostOptions options, std::unique_ptr<grpc::Server> server,
                         int grpc_port, std::unique_ptr<grpc::Server> probe_server, int probe_port,
                         std::unique_ptr<MetricsHttpServer> metrics)
    : options_(std::move(options)),
      log_(options_.component),
      server_(std::move(server)),
      grpc_port_(grpc_port),
      probe_server_(std::move(probe_server)),
      probe_port_(probe_port),
      metrics_(std::move(metrics)) {
  ready_gauge_ = &prometheus::BuildGauge()
                      .Name("kforge_ready")
                      .Help("1 while the process reports SERVING on grpc.health.v1.")
                      .Register(*options_.registry)
                      .Add({});
  log_.Info("listening", {{"grpc_port", grpc_port_}, {"metrics_port", metrics_->port()},
                          {"probe_port", probe_port_}});
}

ServiceHost::~ServiceHost() { Shutdown(); }

void ServiceHost::SetServing(bool serving) {
  if (shut_down_) return;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus(serving);
  for (const std::string& name : options_.service_names) {
    health->SetServingStatus(name, serving);
  }
  if (probe_server_ != nullptr) {
    grpc::HealthCheckServiceInterface* probe = probe_server_->GetHealthCheckService();
    probe->SetServingStatus(serving);
    for (const std::string& name : options_.service_names) probe->SetServingStatus(name, serving);
  }
  ready_gauge_->Set(serving ? 1 : 0);
  log_.Info(serving ? "serving" : "not serving");
}

void ServiceHost::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  ready_gauge_->Set(0);
  log_.Info("draining", {{"timeout_s", options_.config.drain_timeout_s()}});
  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(options_.config.drain_timeout_s() * 1000));
  // Shutdown() marks health NOT_SERVING, refuses new calls and cancels the
  // rest at the deadline.
  if (probe_server_ != nullptr) probe_server_->Shutdown(deadline);
  server_->Shutdown(deadline);
  server_->Wait();
  if (probe_server_ != nullptr) probe_server_->Wait();
  log_.Info("stopped");
}

}  // namespace kforge
