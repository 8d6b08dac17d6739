#include "learner/workers/worker_registry.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

TEST(WorkerRegistryTest, RegisterHeartbeatAndExpire) {
  prometheus::Registry prometheus;
  LearnerMetrics metrics(prometheus);
  WorkerRegistry registry(absl::Milliseconds(100), &metrics);
  v1::RegisterWorkerRequest request;
  request.set_worker_name("pod-a");
  const std::string id = registry.Register(request);
  EXPECT_EQ(metrics.workers_registered.Value(), 1);

  v1::HeartbeatRequest beat;
  beat.set_worker_id(id);
  EXPECT_TRUE(registry.Heartbeat(beat));
  EXPECT_TRUE(registry.ExpireStale().empty());
  absl::SleepFor(absl::Milliseconds(150));
  EXPECT_EQ(registry.ExpireStale(), std::vector<std::string>{id});
  EXPECT_FALSE(registry.Heartbeat(beat)) << "an expired worker must re-register";
  EXPECT_EQ(metrics.workers_registered.Value(), 0);
  EXPECT_EQ(metrics.workers_expired.Value(), 1);
}

TEST(WorkerRegistryTest, ReRegisteringByNameReplacesTheOldEntry) {
  prometheus::Registry prometheus;
  LearnerMetrics metrics(prometheus);
  WorkerRegistry registry(absl::Seconds(30), &metrics);
  v1::RegisterWorkerRequest request;
  request.set_worker_name("pod-a");
  const std::string first = registry.Register(request);
  const std::string second = registry.Register(request);
  EXPECT_NE(first, second);
  ASSERT_EQ(registry.Workers().size(), 1u);
  EXPECT_EQ(registry.Workers()[0].id, second);
}

}  // namespace
}  // namespace kforge
