// LearnerDelivery: hands one scored sample to the learner
// (LearnerService.DeliverSamples) and returns its acknowledgement, retrying
// transient failures (unavailable, deadline, a full experience buffer) with
// the RpcPolicy's back-off.
//
//   LearnerDelivery delivery(config.learner_address(), config.rpc(), "verifier-0");
//   absl::StatusOr<v1::SampleAck> ack = delivery.Deliver(request.sample(), verdict);
//
// The verifier delivers before it answers the rollout worker: a verdict the
// worker received is one the learner has, so a verifier that dies in
// between makes the worker re-send and the learner answer DUPLICATE, never
// lose the sample. The rollout worker delivers the samples no verifier
// would take (refused, or unanswered after every attempt) itself, with the
// verdict its dispatcher gave them. Thread-safe.
#ifndef KFORGE_COMMON_CLIENT_LEARNER_DELIVERY_H_
#define KFORGE_COMMON_CLIENT_LEARNER_DELIVERY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/security/channel_security.h"
#include "kforge/v1/learner_service.grpc.pb.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge {

// An acknowledgement's status as the metrics label it is counted under
// ("accepted", "duplicate", ...), the same at the learner and its senders.
std::string AckLabel(v1::SampleAck::Status status);

class LearnerDelivery {
 public:
  // `security`: plaintext, or TLS (and a service token) to the learner.
  LearnerDelivery(const std::string& learner_address, const v1::RpcPolicy& policy,
                  std::string verifier_id, const ChannelSecurity& security = {});

  // The learner's acknowledgement (any status is final), or the error of the
  // last attempt.
  absl::StatusOr<v1::SampleAck> Deliver(const v1::Sample& sample, const v1::Verdict& verdict);

 private:
  const v1::RpcPolicy policy_;
  const std::string verifier_id_;
  std::unique_ptr<v1::LearnerService::Stub> stub_;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_CLIENT_LEARNER_DELIVERY_H_
