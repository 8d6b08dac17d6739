#include "common/metrics/metrics_http_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include "tests/support/service_process.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

TEST(MetricsHttpServerTest, ServesRegistryInPrometheusTextFormat) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto& counter = prometheus::BuildCounter()
                      .Name("kforge_test_events_total")
                      .Help("Events seen by the test.")
                      .Register(*registry)
                      .Add({{"kind", "a"}});
  counter.Increment(3);
  auto server = MetricsHttpServer::Create("127.0.0.1", 0, registry);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  absl::StatusOr<std::string> response = testing::HttpGet((*server)->port(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_THAT(*response, HasSubstr("HTTP/1.1 200 OK"));
  EXPECT_THAT(*response, HasSubstr("text/plain; version=0.0.4"));
  EXPECT_THAT(*response, HasSubstr("# TYPE kforge_test_events_total counter"));
  EXPECT_THAT(*response, HasSubstr("kforge_test_events_total{kind=\"a\"} 3"));
}

TEST(MetricsHttpServerTest, OtherPathsAre404AndServerKeepsServing) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto server = MetricsHttpServer::Create("127.0.0.1", 0, registry);
  ASSERT_TRUE(server.ok());
  EXPECT_THAT(*testing::HttpGet((*server)->port(), "/nope"), HasSubstr("404 Not Found"));
  EXPECT_THAT(*testing::HttpGet((*server)->port(), "/metrics"), HasSubstr("200 OK"));
}

TEST(MetricsHttpServerTest, PortInUseIsAClearError) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto first = MetricsHttpServer::Create("127.0.0.1", 0, registry);
  ASSERT_TRUE(first.ok());
  auto second = MetricsHttpServer::Create("127.0.0.1", (*first)->port(), registry);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("bind metrics port"));
}

}  // namespace
}  // namespace kforge
