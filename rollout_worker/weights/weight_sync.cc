#include "rollout_worker/weights/weight_sync.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/client/rpc_client.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "model/weights/weight_stream.h"
#include "rollout_worker/sampler/rollout_engine.h"

namespace kforge {
namespace {

// How often a wait for a broadcast looks at the worker's stop signal.
constexpr absl::Duration kStopCheck = absl::Milliseconds(200);

}  // namespace

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
  {
    absl::MutexLock lock(&mu_);
    auto fresh = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return job_id == job_id_ && version_ >= min_version && version_ <= learner_version;
    };
    if (fresh()) return absl::OkStatus();
    // A broadcast only brings newer versions of the job the group serves:
    // worth waiting for when the worker is behind, not when it is ahead of
    // a learner that went back to an older checkpoint.
    if (broadcast_member_ && job_id == job_id_ && version_ < min_version) {
      auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return fresh() || !broadcast_member_;
      };
      const absl::Time until = absl::Now() + absl::Seconds(config_.broadcast_wait_s());
      // In slices, so a stopping worker does not wait the whole time.
      while (!done() && !stop_->HasBeenNotified() && absl::Now() < until) {
        mu_.AwaitWithDeadline(absl::Condition(&done), std::min(until, absl::Now() + kStopCheck));
      }
      if (fresh()) return absl::OkStatus();
    }
  }
  return Fetch(job_id, learner_version);
}

void WeightSync::SetBroadcastMember(bool member) {
  absl::MutexLock lock(&mu_);
  broadcast_member_ = member;
}

void WeightSync::NoteApplied(const std::string& job_id, int64_t version) {
  absl::MutexLock lock(&mu_);
  job_id_ = job_id;
  version_ = version;
  metrics_->weight_version.Set(static_cast<double>(version));
}

std::string WeightSync::job_id() const {
  absl::MutexLock lock(&mu_);
  return job_id_;
}

int64_t WeightSync::version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

absl::StatusOr<std::unique_ptr<WeightAssembler>> WeightSync::Download(const std::string& job_id) {
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
  return assembler;
}

absl::Status WeightSync::Apply(WeightAssembler& assembler) {
  KF_ASSIGN_OR_RETURN(const int64_t version, assembler.Apply());
  engine_->set_policy_version(version);
  NoteApplied(assembler.job_id(), version);
  return absl::OkStatus();
}

bool WeightSync::Superseded(const std::string& job_id, int64_t version,
                            int64_t learner_version) const {
  absl::MutexLock lock(&mu_);
  return job_id == job_id_ && version < version_ && version_ <= learner_version;
}

absl::Status WeightSync::Fetch(const std::string& job_id, int64_t learner_version) {
  const absl::Time started = absl::Now();
  KF_ASSIGN_OR_RETURN(std::unique_ptr<WeightAssembler> assembler, Download(job_id));
  // Applied on the sampler thread, between two decode steps.
  auto result = std::make_shared<absl::Status>(absl::UnknownError("weights not applied"));
  std::shared_ptr<WeightAssembler> staged = std::move(assembler);
  const bool ran = engine_->RunBetweenStepsAndWait(
      [this, result, staged, learner_version] {
        // A broadcast may have brought a newer version meanwhile: keep it.
        *result = Superseded(staged->job_id(), staged->version(), learner_version)
                      ? absl::OkStatus()
                      : Apply(*staged);
      },
      *stop_);
  if (!ran) return absl::CancelledError("worker stopping");
  KF_RETURN_IF_ERROR(*result);
  const absl::Duration took = absl::Now() - started;
  metrics_->ObserveWeightUpdate(took, "grpc");
  log_.Info("weights applied", {{"job", staged->job_id()}, {"version", version()},
                                {"path", "grpc"}, {"seconds", absl::ToDoubleSeconds(took)}});
  return absl::OkStatus();
}

absl::Status WeightSync::RefetchOnSampler(const std::string& job_id) {
  const absl::Time started = absl::Now();
  absl::Status repaired = [&]() -> absl::Status {
    KF_ASSIGN_OR_RETURN(std::unique_ptr<WeightAssembler> assembler, Download(job_id));
    return Apply(*assembler);
  }();
  if (repaired.ok()) {
    metrics_->ObserveWeightUpdate(absl::Now() - started, "grpc");
    log_.Info("weights re-fetched after a failed broadcast", {{"job", job_id}, {"version", version()}});
    return absl::OkStatus();
  }
  {
    absl::MutexLock lock(&mu_);
    version_ = -1;  // the next Ensure fetches
  }
  engine_->DropAll(absl::UnavailableError(absl::StrCat(
      "the weights are unusable after a failed broadcast and could not be re-fetched: ",
      repaired.message())));
  return repaired;
}

}  // namespace kforge
