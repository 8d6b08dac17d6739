#include "common/metrics/grpc_metrics_interceptor.h"

#include <chrono>
#include <string>
#include "absl/strings/string_view.h"

namespace kforge {
namespace {

// gRPC code names as Prometheus label values ("OK", "INVALID_ARGUMENT").
absl::string_view CodeName(grpc::StatusCode code) {
  static constexpr absl::string_view kNames[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
      "UNAUTHENTICATED"};
  const int index = static_cast<int>(code);
  return index >= 0 && index < 17 ? kNames[index] : "UNKNOWN";
}

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return kBuckets;
}

class GrpcMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  GrpcMetricsInterceptor(std::string method, prometheus::Family<prometheus::Counter>& handled,
                         prometheus::Family<prometheus::Histogram>& latency)
      : handled_(handled), latency_(latency), start_(std::chrono::steady_clock::now()) {
    // "/kforge.v1.JobService/SubmitJob" -> service, method.
    const size_t slash = method.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      service_ = method.substr(1, slash - 1);
      method_ = method.substr(slash + 1);
    } else {
      service_ = "unknown";
      method_ = method;
    }
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      handled_
          .Add({{"grpc_service", service_},
                {"grpc_method", method_},
                {"grpc_code", std::string(CodeName(status.error_code()))}})
          .Increment();
      latency_.Add({{"grpc_service", service_}, {"grpc_method", method_}}, LatencyBuckets())
          .Observe(seconds);
    }
    methods->Proceed();
  }

 private:
  prometheus::Family<prometheus::Counter>& handled_;
  prometheus::Family<prometheus::Histogram>& latency_;
  std::chrono::steady_clock::time_point start_;
  std::string service_;
  std::string method_;
};

}  // namespace

GrpcMetricsInterceptorFactory::GrpcMetricsInterceptorFactory(prometheus::Registry& registry)
    : handled_(prometheus::BuildCounter()
                   .Name("kforge_grpc_server_handled_total")
                   .Help("RPCs completed on the server, by service, method and status code.")
                   .Register(registry)),
      latency_(prometheus::BuildHistogram()
                   .Name("kforge_grpc_server_handling_seconds")
                   .Help("Time from the start of an RPC to its status, by service and method.")
                   .Register(registry)) {}

grpc::experimental::Interceptor* GrpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  // gRPC takes ownership of the returned interceptor.
  return new GrpcMetricsInterceptor(info->method(), handled_, latency_);
}

}  // namespace kforge
