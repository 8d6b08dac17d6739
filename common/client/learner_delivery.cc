#include "common/client/learner_delivery.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/client/rpc_client.h"
#include "common/grpc_status.h"

namespace kforge {

std::string AckLabel(v1::SampleAck::Status status) {
  return absl::AsciiStrToLower(v1::SampleAck::Status_Name(status));
}

LearnerDelivery::LearnerDelivery(const std::string& learner_address, const v1::RpcPolicy& policy,
                                 std::string verifier_id, const ChannelSecurity& security)
    : policy_(policy),
      verifier_id_(std::move(verifier_id)),
      stub_(v1::LearnerService::NewStub(security.Connect(learner_address))) {}

absl::StatusOr<v1::SampleAck> LearnerDelivery::Deliver(const v1::Sample& sample,
                                                       const v1::Verdict& verdict) {
  v1::DeliverSamplesRequest request;
  request.set_sender_id(verifier_id_);
  v1::ScoredSample* scored = request.add_samples();
  *scored->mutable_sample() = sample;
  *scored->mutable_verdict() = verdict;
  scored->set_verifier_id(verifier_id_);
  v1::DeliverSamplesResponse response;
  const grpc::Status status = CallWithRetry(policy_, [&](grpc::ClientContext& context) {
    response.Clear();
    return stub_->DeliverSamples(&context, request, &response);
  });
  if (!status.ok()) return FromGrpcStatus(status);
  if (response.acks_size() != 1) {
    return absl::InternalError(
        absl::StrCat("the learner answered ", response.acks_size(), " acks for one sample"));
  }
  return response.acks(0);
}

}  // namespace kforge
