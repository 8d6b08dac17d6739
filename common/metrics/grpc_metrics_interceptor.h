// A gRPC server interceptor that counts every call by service, method and
// status code and observes its latency, for every kforge server alike:
//
//   kforge_grpc_server_handled_total{grpc_service,grpc_method,grpc_code}
//   kforge_grpc_server_handling_seconds{grpc_service,grpc_method}  (histogram)
//
// Installed by ServiceHost; services need not count their own calls.
#ifndef KFORGE_COMMON_METRICS_GRPC_METRICS_INTERCEPTOR_H_
#define KFORGE_COMMON_METRICS_GRPC_METRICS_INTERCEPTOR_H_

#include <memory>

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace kforge {

class GrpcMetricsInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit GrpcMetricsInterceptorFactory(prometheus::Registry& registry);
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  prometheus::Family<prometheus::Counter>& handled_;
  prometheus::Family<prometheus::Histogram>& latency_;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_METRICS_GRPC_METRICS_INTERCEPTOR_H_
