#include "verifier_worker/verifier_service.h"

#include <set>

#include "absl/strings/ascii.h"
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
      // Every queued closure was admitted and has not released its slot
      // yet, so the queue never outgrows Admit()'s limit and Submit (called
      // with a stream's lock held) never waits.
      pool_("kf-verify", config->max_concurrent(),
            config->max_concurrent() + config->max_queued()) {}

SlotClock::Reading VerifierServiceImpl::busy_time() const { return busy_.Read(absl::Now()); }

v1::Verdict VerifierServiceImpl::VerifyAndDeliver(const v1::VerifyRequest& request) {
  const absl::Time started = absl::Now();
  busy_.Begin(started);
  v1::Verdict verdict = funnel_->Verify(request);
  const absl::Time finished = absl::Now();
  busy_.End(finished);
  // Stamped here, not in the funnel: a verdict the funnel's cache serves
  // keeps the stamps of this verification, not of the first.
  verdict.set_started_at_us(absl::ToUnixMicros(started));
  verdict.set_finished_at_us(absl::ToUnixMicros(finished));
  if (!request.deliver_to_learner() || !request.has_sample()) return verdict;
  if (delivery_ == nullptr) {
    metrics_->RecordDelivery("no_learner");
    log_.Warning("deliver_to_learner set but no learner_address configured",
                 {{"request", request.request_id()}});
    return verdict;
  }
  absl::StatusOr<v1::SampleAck> ack = delivery_->Deliver(request.sample(), verdict);
  if (!ack.ok()) {
    // The learner's group timeout re-issues what never arrived.
    metrics_->RecordDelivery("failed");
    log_.Error("sample not delivered to the learner",
               {{"sample", request.sample().key().sample_id()}, {"error", ack.status().message()}});
    return verdict;
  }
  metrics_->RecordDelivery(absl::AsciiStrToLower(v1::SampleAck::Status_Name(ack->status())));
  return verdict;
}

bool VerifierServiceImpl::Admit() {
  const int limit = config_->max_concurrent() + config_->max_queued();
  int current = admitted_.load();
  do {
    if (current >= limit) return false;
  } while (!admitted_.compare_exchange_weak(current, current + 1));
  metrics_->queue_depth.Set(static_cast<double>(pool_.queued()));
  return true;
}

void VerifierServiceImpl::Release() {
  admitted_.fetch_sub(1);
  metrics_->queue_depth.Set(static_cast<double>(pool_.queued()));
}

grpc::Status VerifierServiceImpl::Verify(grpc::ServerContext* context,
                                         const v1::VerifyRequest* request,
                                         v1::VerifyResponse* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  v1::VerifyRequest prepared = *request;
  if (absl::Status s = PrepareVerifyRequest(prepared); !s.ok()) return ToGrpcStatus(s);
  if (!Admit()) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("verifier full: ", config_->max_concurrent(), " running and ",
                         config_->max_queued(), " queued")};
  }
  response->set_request_id(request->request_id());
  *response->mutable_verdict() = VerifyAndDeliver(prepared);
  Release();
  return grpc::Status::OK;
}

grpc::Status VerifierServiceImpl::VerifyStream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::VerifyStreamResponse, v1::VerifyRequest>* stream) {
  KF_AUTHORIZE(guard_.Check(*context));
  // Shared between this RPC thread (reading) and the pool (answering).
  struct StreamState {
    absl::Mutex mu;
    std::set<std::string> in_flight ABSL_GUARDED_BY(mu);
    int credits ABSL_GUARDED_BY(mu) = 0;
    bool broken ABSL_GUARDED_BY(mu) = false;
  } state;
  // Called with state.mu held.
  auto write = [&](const v1::VerifyStreamResponse& message) {
    if (!state.broken && !stream->Write(message)) state.broken = true;
  };
  {
    absl::MutexLock lock(&state.mu);
    state.credits = config_->max_queued();
    v1::VerifyStreamResponse grant;
    grant.mutable_credit()->set_credits(state.credits);
    write(grant);
  }
  v1::VerifyRequest request;
  while (stream->Read(&request)) {
    v1::VerifyStreamResponse ack;
    ack.mutable_ack()->set_request_id(request.request_id());
    absl::Status valid = PrepareVerifyRequest(request);
    absl::MutexLock lock(&state.mu);
    if (request.request_id().empty()) valid = absl::InvalidArgumentError("request_id: is required");
    if (valid.ok() && state.in_flight.contains(request.request_id())) {
      valid = absl::AlreadyExistsError("duplicate request_id in flight");
    }
    if (valid.ok() && state.credits <= 0) {
      valid = absl::ResourceExhaustedError("sent without a credit");
    }
    if (valid.ok() && !Admit()) valid = absl::ResourceExhaustedError("verifier full");
    ack.mutable_ack()->set_accepted(valid.ok());
    ack.mutable_ack()->set_reason(std::string(valid.message()));
    write(ack);
    if (!valid.ok()) {
      const char* kind = absl::IsInvalidArgument(valid)  ? "invalid"
                         : absl::IsAlreadyExists(valid) ? "duplicate"
                         : state.credits <= 0           ? "no_credit"
                                                        : "full";
      metrics_->RecordStreamRejection(kind);
      // "full" and "no credit" are back-pressure, counted only: under load
      // they come by the thousand. A malformed request is worth a line.
      if (absl::IsInvalidArgument(valid) || absl::IsAlreadyExists(valid)) {
        log_.Warning("stream request refused", {{"request", request.request_id()},
                                                {"peer", context->peer()},
                                                {"reason", valid.message()}});
      }
      // The client spent a credit on this request; give it back unless it
      // had none to spend.
      if (state.credits > 0) {
        v1::VerifyStreamResponse grant;
        grant.mutable_credit()->set_credits(1);
        write(grant);
      }
      continue;
    }
    --state.credits;
    state.in_flight.insert(request.request_id());
    pool_.Submit([this, &state, &write, request] {
      v1::VerifyStreamResponse result;
      result.mutable_result()->set_request_id(request.request_id());
      *result.mutable_result()->mutable_verdict() = VerifyAndDeliver(request);
      Release();
      absl::MutexLock lock(&state.mu);
      write(result);
      ++state.credits;
      v1::VerifyStreamResponse grant;
      grant.mutable_credit()->set_credits(1);
      write(grant);
      state.in_flight.erase(request.request_id());
    });
  }
  // The client is done sending: answer what was accepted, then close.
  absl::MutexLock lock(&state.mu);
  state.mu.Await(absl::Condition(
      +[](StreamState* s) { return s->in_flight.empty(); },
      &state));
  if (context->IsCancelled()) {
    // Verdicts of requests still running when it went were dropped.
    metrics_->streams_cancelled.Increment();
    log_.Warning("stream cancelled by the client", {{"peer", context->peer()}});
    return {grpc::StatusCode::CANCELLED, "the client went away"};
  }
  return grpc::Status::OK;
}

}  // namespace kforge
