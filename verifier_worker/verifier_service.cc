#include "verifier_worker/verifier_service.h"

#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/config/json_config.h"
#include "common/grpc_status.h"

namespace kforge {

absl::Status PrepareVerifyRequest(v1::VerifyRequest& request) {
  if (request.task().reference_source().empty()) {
    return absl::InvalidArgumentError("task.reference_source: is required");
  }
  // An empty completion is a model's answer like any other (a sample that
  // ended at once): the funnel fails it at its first stage, no code found.
  return FinalizeConfig(request.mutable_options(), "options");
}

VerifierServiceImpl::VerifierServiceImpl(Funnel* funnel, VerifierMetrics* metrics,
                                         const v1::VerifierWorkerConfig* config,
                                         LearnerDelivery* delivery, CallGuard guard)
    : funnel_(funnel), metrics_(metrics), config_(config), delivery_(delivery),
      guard_(std::move(guard)),
      busy_(config->max_concurrent(), absl::Now()),
      credits_(config->max_concurrent() + config->max_queued()),
      // Every queued closure holds one of credits_' places until it is
      // answered, so the queue never outgrows them and Submit (called with
      // a stream's lock held) never waits.
      pool_("kf-verify", config->max_concurrent(),
            config->max_concurrent() + config->max_queued()) {}

SlotClock::Reading VerifierServiceImpl::busy_time() const { return busy_.Read(absl::Now()); }

v1::VerifyResponse VerifierServiceImpl::VerifyAndDeliver(const v1::VerifyRequest& request) {
  v1::VerifyResponse response;
  response.set_request_id(request.request_id());
  v1::Verdict& verdict = *response.mutable_verdict();
  const absl::Time started = absl::Now();
  busy_.Begin(started);
  verdict = funnel_->Verify(request);
  const absl::Time finished = absl::Now();
  busy_.End(finished);
  // Stamped here, not in the funnel: a verdict the funnel's cache serves
  // keeps the stamps of this verification, not of the first.
  verdict.set_started_at_us(absl::ToUnixMicros(started));
  verdict.set_finished_at_us(absl::ToUnixMicros(finished));
  if (!request.deliver_to_learner() || !request.has_sample()) return response;
  if (delivery_ == nullptr) {
    metrics_->RecordDelivery("no_learner");
    log_.Warning("deliver_to_learner set but no learner_address configured",
                 {{"request", request.request_id()}});
    return response;
  }
  absl::StatusOr<v1::SampleAck> ack = delivery_->Deliver(request.sample(), verdict);
  if (!ack.ok()) {
    // The learner's group timeout re-issues what never arrived.
    metrics_->RecordDelivery("failed");
    log_.Error("sample not delivered to the learner",
               {{"sample", request.sample().key().sample_id()}, {"error", ack.status().message()}});
    return response;
  }
  metrics_->RecordDelivery(AckLabel(ack->status()));
  *response.mutable_learner_ack() = *std::move(ack);
  return response;
}


grpc::Status VerifierServiceImpl::Verify(grpc::ServerContext* context,
                                         const v1::VerifyRequest* request,
                                         v1::VerifyResponse* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  v1::VerifyRequest prepared = *request;
  if (absl::Status s = PrepareVerifyRequest(prepared); !s.ok()) return ToGrpcStatus(s);
  if (!credits_.TakeUnary()) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("verifier full: ", config_->max_concurrent(), " running and ",
                         config_->max_queued(), " queued")};
  }
  // The place goes back however the call ends.
  struct UnaryPlace {
    StreamCredits& credits;
    ~UnaryPlace() { credits.FinishUnary(); }
  } place{credits_};
  *response = VerifyAndDeliver(prepared);
  return grpc::Status::OK;
}

grpc::Status VerifierServiceImpl::VerifyStream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::VerifyStreamResponse, v1::VerifyRequest>* stream) {
  KF_AUTHORIZE(guard_.Check(*context));
  // Every message to the client goes through the stream's writer thread:
  // the pool (answering) and other streams' threads (granting freed
  // places) only queue. It outlives this call when a grant comes late, and
  // drops that grant.
  auto writer = std::make_shared<StreamWriter>(
      stream, config_->max_concurrent() + config_->max_queued());
  // Requests of this stream being verified; shared with the pool's closures.
  struct InFlight {
    absl::Mutex mu;
    std::set<std::string> ids ABSL_GUARDED_BY(mu);
  };
  auto in_flight = std::make_shared<InFlight>();
  const int64_t id = credits_.Open([writer](int credits) { writer->Grant(credits); });
  v1::VerifyRequest request;
  while (stream->Read(&request)) {
    v1::VerifyStreamResponse ack;
    ack.mutable_ack()->set_request_id(request.request_id());
    absl::Status valid = PrepareVerifyRequest(request);
    if (request.request_id().empty()) valid = absl::InvalidArgumentError("request_id: is required");
    {
      absl::MutexLock lock(&in_flight->mu);
      if (valid.ok() && in_flight->ids.contains(request.request_id())) {
        valid = absl::AlreadyExistsError("duplicate request_id in flight");
      }
      // The credit is spent only by a request that is admitted.
      const bool had_credit = !valid.ok() || credits_.Spend(id);
      if (!had_credit) valid = absl::ResourceExhaustedError("sent without a credit");
      if (valid.ok()) in_flight->ids.insert(request.request_id());
    }
    ack.mutable_ack()->set_accepted(valid.ok());
    ack.mutable_ack()->set_reason(std::string(valid.message()));
    writer->Ack(std::move(ack));
    if (!valid.ok()) {
      const std::string kind = absl::IsInvalidArgument(valid)  ? "invalid"
                               : absl::IsAlreadyExists(valid) ? "duplicate"
                                                              : "no_credit";
      metrics_->RecordStreamRejection(kind);
      // "no credit" is counted only: it follows a credit taken back while
      // the request was on its way. A malformed request is worth a line.
      if (kind != "no_credit") {
        log_.Warning("stream request refused", {{"request", request.request_id()},
                                                {"peer", context->peer()},
                                                {"reason", valid.message()}});
      }
      // Either way the client spent a credit the ledger did not take: the
      // client's count is made whole, and again matches the ledger's.
      writer->Grant(1);
      continue;
    }
    metrics_->queue_depth.Set(static_cast<double>(pool_.queued() + 1));
    pool_.Submit([this, writer, in_flight, id, request] {
      v1::VerifyStreamResponse result;
      *result.mutable_result() = VerifyAndDeliver(request);
      writer->Send(std::move(result));
      // Frees the place (granted back to this stream or to one below its
      // share) before the stream may close.
      credits_.Finish(id);
      metrics_->queue_depth.Set(static_cast<double>(pool_.queued()));
      absl::MutexLock lock(&in_flight->mu);
      in_flight->ids.erase(request.request_id());
    });
  }
  // The client is done sending: answer what was accepted, then close.
  {
    absl::MutexLock lock(&in_flight->mu);
    in_flight->mu.Await(absl::Condition(
        +[](InFlight* f) { return f->ids.empty(); }, in_flight.get()));
  }
  credits_.Close(id);
  writer->Close();  // the verdicts queued are written before the call returns
  if (context->IsCancelled()) {
    // Verdicts of requests still running when it went were dropped.
    metrics_->streams_cancelled.Increment();
    log_.Warning("stream cancelled by the client", {{"peer", context->peer()}});
    return {grpc::StatusCode::CANCELLED, "the client went away"};
  }
  return grpc::Status::OK;
}

}  // namespace kforge
