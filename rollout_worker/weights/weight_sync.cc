#include "rollout_worker/weights/weight_sync.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/client/rpc_client.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "model/weights/weight_stream.h"
#include "rollout_worker/sampler/rollout_engine.h"

namespace kforge {

WeightSync::WeightSync(v1::LearnerService::Stub* learner, DecoderModel* model,
                       RolloutEngine* engine, const v1::RolloutWorkerConfig& config,
                       RolloutMetrics* metrics, const absl::Notification* stop)
    : learner_(learner),
      model_(model),
      engine_(engine),
      config_(config),
      metrics_(metrics),
      stop_(stop) {}

absl::Status WeightSync::Ensure(const std::string& job_id, int64_t min_version,
                               int64_t learner_version) {
  if (job_id == job_id_ && version_ >= min_version && version_ <= learner_version) {
    return absl::OkStatus();
  }
  return Fetch(job_id);
}

absl::Status WeightSync::Fetch(const std::string& job_id) {
  const absl::Time started = absl::Now();
  KF_ASSIGN_OR_RETURN(std::unique_ptr<WeightAssembler> assembler, WeightAssembler::Create(model_));
  v1::GetWeightsRequest request;
  request.set_job_id(job_id);
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(config_.weight_fetch_timeout_s()));
  std::unique_ptr<grpc::ClientReader<v1::WeightChunk>> reader = learner_->GetWeights(&context, request);
  v1::WeightChunk chunk;
  absl::Status added = absl::OkStatus();
  while (added.ok() && reader->Read(&chunk)) added = assembler->Add(chunk);
  if (!added.ok()) {
    context.TryCancel();
    reader->Finish().ok();
    return added;
  }
  if (absl::Status s = FromGrpcStatus(reader->Finish()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("GetWeights: ", s.message()));
  }
  // Applied on the sampler thread, between two decode steps.
  absl::Notification applied;
  absl::StatusOr<int64_t> version = absl::UnknownError("weights not applied");
  engine_->RunBetweenSteps([&] {
    version = assembler->Apply();
    if (version.ok()) engine_->set_policy_version(*version);
    applied.Notify();
  });
  while (!applied.WaitForNotificationWithTimeout(absl::Milliseconds(200))) {
    if (stop_->HasBeenNotified()) return absl::CancelledError("worker stopping");
  }
  KF_RETURN_IF_ERROR(version.status());
  job_id_ = assembler->job_id();
  version_ = *version;
  const absl::Duration took = absl::Now() - started;
  metrics_->weight_version.Set(static_cast<double>(version_));
  metrics_->ObserveWeightUpdate(took);
  log_.Info("weights applied", {{"job", job_id_}, {"version", version_},
                                {"seconds", absl::ToDoubleSeconds(took)}});
  return absl::OkStatus();
}

}  // namespace kforge
