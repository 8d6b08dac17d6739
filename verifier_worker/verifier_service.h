// The gRPC shell of VerifierService over the Funnel. Verify answers one
// candidate; VerifyStream takes many, acknowledges each on receipt, answers
// in completion order, and grants credits so the candidates waiting here
// never exceed its places (max_concurrent + max_queued, shared by every
// stream: stream_credits.h); a slow verifier pushes back.
#ifndef KFORGE_VERIFIER_WORKER_VERIFIER_SERVICE_H_
#define KFORGE_VERIFIER_WORKER_VERIFIER_SERVICE_H_

#include <atomic>

#include "common/logging/logger.h"
#include "common/metrics/slot_clock.h"
#include "common/security/call_auth.h"
#include "common/server/work_pool.h"
#include "kforge/v1/service_config.pb.h"
#include "kforge/v1/verifier_service.grpc.pb.h"
#include "common/client/learner_delivery.h"
#include "verifier_worker/funnel/funnel.h"
#include "verifier_worker/stream_credits.h"
#include "verifier_worker/stream_writer.h"
#include "verifier_worker/verifier_metrics.h"

namespace kforge {

// Checks a request and fills its option defaults. INVALID_ARGUMENT names
// the field.
absl::Status PrepareVerifyRequest(kforge::v1::VerifyRequest& request);

class VerifierServiceImpl final : public kforge::v1::VerifierService::Service {
 public:
  // `delivery` may be null: no learner to hand scored samples to. Every
  // call first passes `guard` (mesh peers only; common/security/call_auth.h).
  VerifierServiceImpl(Funnel* funnel, VerifierMetrics* metrics,
                      const kforge::v1::VerifierWorkerConfig* config,
                      LearnerDelivery* delivery = nullptr, CallGuard guard = {});

  grpc::Status Verify(grpc::ServerContext* context, const kforge::v1::VerifyRequest* request,
                      kforge::v1::VerifyResponse* response) override;
  grpc::Status VerifyStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<kforge::v1::VerifyStreamResponse, kforge::v1::VerifyRequest>* stream)
      override;

  // Slot-time of the max_concurrent verification slots since start, busy
  // (a candidate in the funnel) and idle; thread-safe.
  SlotClock::Reading busy_time() const;

 private:
  // Runs the funnel, then hands the scored sample to the learner when the
  // request asks for it, before the verdict goes back to the caller: the
  // answer carries the verdict and the learner's ack (whose next_turn the
  // rollout worker follows for multi-turn trajectories).
  kforge::v1::VerifyResponse VerifyAndDeliver(const kforge::v1::VerifyRequest& request);

  Funnel* const funnel_;
  VerifierMetrics* const metrics_;
  const kforge::v1::VerifierWorkerConfig* const config_;
  LearnerDelivery* const delivery_;
  const CallGuard guard_;
  Logger log_{"verifier"};
  SlotClock busy_;
  // Admission: max_concurrent + max_queued places, shared out as stream
  // credits (a client honouring them is never refused as full).
  StreamCredits credits_;
  WorkPool pool_;  // last: its threads use the members above until joined
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_VERIFIER_SERVICE_H_
