#include "rollout_worker/rollout_pipeline.h"

#include <pthread.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/client/backoff.h"
#include "common/client/rpc_client.h"
#include "common/status_macros.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/weights/nccl_communicator.h"
#include "prompts/trajectory_end.h"

namespace kforge {

absl::StatusOr<std::unique_ptr<RolloutPipeline>> RolloutPipeline::Create(
    const v1::RolloutWorkerConfig& config, LoadedPolicy* policy, const LearnerLink* link,
    RolloutMetrics* metrics, const ChannelSecurity& security) {
  auto pipeline =
      std::unique_ptr<RolloutPipeline>(new RolloutPipeline(config, *policy, link, metrics, security));
  RolloutPipeline* p = pipeline.get();
  KF_ASSIGN_OR_RETURN(
      p->dispatcher_,
      VerifierDispatcher::Create(
          {.target = config.verifier_target(),
           .max_outstanding = config.max_unacked_samples(),
           .verify_timeout = absl::Seconds(config.verify_timeout_s()),
           .backoff_initial = absl::Seconds(config.rpc().backoff_initial_s()),
           .backoff_max = absl::Seconds(config.rpc().backoff_max_s()),
           .max_attempts = config.verify_max_attempts(),
           .task_affinity = config.verifier_task_affinity(),
           .task_affinity_slack = config.verifier_affinity_slack(),
           .security = security,
           .on_local_answer =
               [p](const v1::VerifyRequest& request, const v1::VerifyResponse& response) {
                 p->DeliverLocally(request, response);
               }},
          // The verifier forwards the scored sample to the learner; here
          // the verdict closes the sample's account, and for a multi-turn
          // trajectory decides its next turn.
          [p](const v1::VerifyResponse& response) { p->OnVerdict(response); }));
  if (TakesPartInBroadcast(config)) {
    // Before the engine plans its KV cache from the memory left and
    // captures graphs over the parameters' addresses.
    absl::StatusOr<std::unique_ptr<FlatParameters>> flat = FlatParameters::Create(policy->model.get());
    if (flat.ok()) {
      p->flat_ = *std::move(flat);
      p->log_.Info("parameters in flat buffers for the NCCL weight broadcast",
                   {{"layout", p->flat_->Layout()}});
    } else {
      p->log_.Warning("no NCCL weight broadcast; weights come over gRPC",
                      {{"error", flat.status().message()}});
    }
  }
  KF_ASSIGN_OR_RETURN(
      p->engine_,
      RolloutEngine::Create(
          policy->model.get(), policy->tokenizer.get(),
          {.worker_id = config.worker_name(),
           .slots = config.max_batch_sequences(),
           .max_len = config.max_sequence_tokens(),
           .decode = {.cuda_graphs = config.decode_cuda_graphs(),
                      .span_bucket = config.cuda_graph_span_bucket(),
                      .max_graphs = config.max_cuda_graphs()}},
          [p](v1::Sample sample, const v1::WorkItem& item, absl::Duration ttft) {
            p->OnSample(std::move(sample), item, ttft);
          },
          [p](const v1::WorkItem& item, const absl::Status& status) {
            p->metrics_->groups_dropped.Increment();
            p->log_.Warning("group dropped", {{"group", item.group_id()},
                                              {"error", status.message()}});
            p->Release(item.group_id(), absl::StrCat("sampling failed: ", status.message()));
          }));
  p->weight_sync_ = std::make_unique<WeightSync>(p->learner_.get(), policy->model.get(),
                                                 p->engine_.get(), config, metrics, &p->stop_);
  if (p->flat_ != nullptr) {
    p->broadcast_receiver_ = BroadcastReceiver::Start(
        config, {.learner = p->learner_.get(), .params = p->flat_.get(), .engine = p->engine_.get(),
                 .sync = p->weight_sync_.get(), .link = link, .metrics = metrics});
  }
  // The ticker thread alone reads and writes graphs_off_logged.
  auto update_metrics = [p, graphs_off_logged = std::string()]() mutable {
    const GeneratorStats stats = p->engine_->generator_stats();
    p->metrics_->Update(stats, p->dispatcher_->stats(), p->engine_->groups_in_flight(),
                        p->engine_->sampler_times());
    if (stats.decoder.graphs_off != graphs_off_logged) {
      graphs_off_logged = stats.decoder.graphs_off;
      p->log_.Info("decode steps run eagerly", {{"reason", graphs_off_logged}});
    }
  };
  update_metrics();  // the first scrape already sees the cache's size
  p->metrics_thread_ =
      std::make_unique<PeriodicThread>("kf-rollout-mtr", absl::Seconds(1), update_metrics);
  p->take_work_thread_ = std::thread([p] {
    pthread_setname_np(pthread_self(), "kf-take-work");
    p->TakeWorkLoop();
  });
  return pipeline;
}

bool RolloutPipeline::TakesPartInBroadcast(const v1::RolloutWorkerConfig& config) {
  return config.nccl_broadcast() && NcclCommunicator::Available() &&
         config.device().rfind("cuda", 0) == 0;
}

RolloutPipeline::RolloutPipeline(const v1::RolloutWorkerConfig& config,
                                 const LoadedPolicy& policy, const LearnerLink* link,
                                 RolloutMetrics* metrics, const ChannelSecurity& security)
    : config_(config),
      link_(link),
      metrics_(metrics),
      learner_(v1::LearnerService::NewStub(security.Connect(config.learner_address()))),
      local_delivery_(config.learner_address(), config.rpc(),
                      absl::StrCat("rollout:", config.worker_name()), security),
      // At most max_unacked_samples deliveries wait: past that the
      // dispatcher thread handing them over waits too, which holds those
      // samples in flight and so stops the sampler (back-pressure, no loss).
      local_deliveries_(std::make_unique<WorkPool>("kf-local-deliver", 1,
                                                   config.max_unacked_samples())),
      // The engine encodes a follow-up's prompt_text with this tokenizer
      // into slots of max_sequence_tokens.
      turns_({.count_tokens =
                  [tokenizer = policy.tokenizer.get()](const std::string& text) {
                    return static_cast<int64_t>(tokenizer->Encode(text).size());
                  },
              .max_len = config.max_sequence_tokens()}) {}

RolloutPipeline::~RolloutPipeline() {
  stop_.Notify();
  if (take_work_thread_.joinable()) take_work_thread_.join();
  broadcast_receiver_.reset();
  metrics_thread_.reset();
  // The sampler thread may be blocked handing a sample to a full
  // dispatcher: release it before joining it.
  if (dispatcher_ != nullptr) dispatcher_->Shutdown();
  {
    absl::MutexLock lock(&follow_up_mu_);
    follow_ups_open_ = false;
  }
  engine_.reset();
  dispatcher_.reset();
  local_deliveries_.reset();  // delivers what is queued, then joins
}

void RolloutPipeline::DeliverLocally(const v1::VerifyRequest& request,
                                     const v1::VerifyResponse& response) {
  if (!request.deliver_to_learner() || !request.has_sample()) return;
  local_deliveries_->Submit([this, sample = request.sample(), verdict = response.verdict()] {
    absl::StatusOr<v1::SampleAck> ack = local_delivery_.Deliver(sample, verdict);
    if (!ack.ok()) {
      // Its group cannot complete without it: give the group back so the
      // learner re-issues it at once rather than at its wait bound.
      metrics_->RecordLocalDelivery("failed");
      log_.Error("a sample no verifier took could not reach the learner; its group is released",
                 {{"sample", sample.key().sample_id()}, {"error", ack.status().message()}});
      Release(sample.key().group_id(),
              absl::StrCat("a sample no verifier took could not be delivered: ",
                           ack.status().message()));
      return;
    }
    metrics_->RecordLocalDelivery(AckLabel(ack->status()));
    if (ack->status() == v1::SampleAck::REJECTED) {
      // Refused, its group cannot complete either: give it back at once.
      Release(sample.key().group_id(),
              absl::StrCat("the learner rejected a sample no verifier took: ", ack->reason()));
    } else if (ack->next_turn() == v1::SampleAck::NEXT_TURN_WANTED) {
      // The dispatcher's own verdict (a fault) ended the trajectory here,
      // but the learner holds a verifier's verdict for this turn (one
      // delivered before its stream broke) that does not: the turn it waits
      // for will never come, so give the group back now.
      Release(sample.key().group_id(),
              "the learner wants a turn after a sample no verifier answered");
    }
    log_.Warning("delivered a sample no verifier took, with the dispatcher's verdict",
                 {{"sample", sample.key().sample_id()},
                  {"ack", v1::SampleAck::Status_Name(ack->status())},
                  {"why", verdict.stages_size() > 0 ? verdict.stages(0).message() : ""}});
  });
}

void RolloutPipeline::OnSample(v1::Sample sample, const v1::WorkItem& item, absl::Duration ttft) {
  metrics_->ObserveTimeToFirstToken(ttft);
  Verify(std::move(sample), item);
}

namespace {

// What a verifier needs of one candidate of `item`: its task, options and
// batches. The learner names the batch (its tasks' reference epochs, secret
// seeds) and the one after, which the verifier makes ahead. Nothing is
// delivered unless the caller attaches the sample and asks for it.
v1::VerifyRequest CandidateRequest(const v1::WorkItem& item, std::string request_id,
                                   std::string completion) {
  v1::VerifyRequest request;
  request.set_request_id(std::move(request_id));
  *request.mutable_task() = item.task();
  request.set_completion(std::move(completion));
  *request.mutable_options() = item.verifier();
  request.set_batch_id(item.batch_id());
  request.set_next_batch_id(item.next_batch_id());
  return request;
}

}  // namespace

void RolloutPipeline::VerifyWarmUp(const v1::WorkItem& item) {
  v1::Sample sample;
  v1::SampleKey* key = sample.mutable_key();
  key->set_sample_id(TurnSampleId(item.job_id(), item.group_id(), 0, 0));
  key->set_job_id(item.job_id());
  key->set_group_id(item.group_id());
  sample.set_task_id(item.task().id());
  sample.set_policy_version(item.min_policy_version());
  sample.set_prompt_text(item.prompt_text());
  sample.set_completion_text(item.warm_up_completion());
  sample.set_finish_reason("warm_up");
  sample.set_rollout_worker_id(config_.worker_name());
  const int64_t now_us = absl::ToUnixMicros(absl::Now());
  sample.set_started_at_us(now_us);
  sample.set_finished_at_us(now_us);
  log_.Info("verifier warm-up sent", {{"group", item.group_id()}, {"task", item.task().id()},
                                      {"batch", item.batch_id()}});
  // The task's next choices get the same completion to verify, only to make
  // the task's reference epochs there: no sample, nothing delivered, the
  // verdict dropped (OnVerdict knows no trajectory of that id).
  // Never two to one verifier: with fewer connected, each gets one.
  const int64_t spread =
      config_.verifier_task_affinity()
          ? std::min<int64_t>(config_.warm_up_verifiers(), dispatcher_->stats().lanes_connected)
          : 1;
  for (int rank = 1; rank < spread; ++rank) {
    v1::VerifyRequest request = CandidateRequest(
        item, absl::StrCat(sample.key().sample_id(), "/prepare-", rank), sample.completion_text());
    if (absl::Status s = dispatcher_->Submit(std::move(request), rank); !s.ok()) {
      log_.Warning("verifier warm-up not spread", {{"task", item.task().id()}, {"rank", rank},
                                                  {"error", s.message()}});
    }
  }
  Verify(std::move(sample), item);
}

void RolloutPipeline::Verify(v1::Sample sample, const v1::WorkItem& item) {
  // A model that ends at once writes no text: the verifier fails that at its
  // first stage like any answer without code. (Were a verifier to refuse a
  // request, DeliverLocally hands the sample to the learner all the same.)
  v1::VerifyRequest request =
      CandidateRequest(item, sample.key().sample_id(), sample.completion_text());
  *request.mutable_sample() = std::move(sample);
  request.set_deliver_to_learner(true);
  turns_.Sampled(request.sample(), item);
  const std::string id = request.request_id();
  const std::string group = request.sample().key().group_id();
  // Blocks while max_unacked_samples await verdicts: sampling waits too.
  if (absl::Status s = dispatcher_->Submit(std::move(request)); !s.ok() && !stop_.HasBeenNotified()) {
    // No verdict will come for it, so neither its delivery nor (multi-turn)
    // its next turn: the group cannot complete. Give it back now rather
    // than at the learner's wait bound.
    metrics_->work_items_rejected.Increment();
    log_.Error("sample not dispatched; its group is released",
               {{"sample", id}, {"error", s.message()}});
    Release(group, absl::StrCat("sample ", id, " not dispatched: ", s.message()));
  }
}

void RolloutPipeline::OnVerdict(const v1::VerifyResponse& response) {
  // The learner's word on the trajectory, when the verifier brought it.
  std::optional<TurnLoop::FollowUp> next = turns_.Answered(
      response.request_id(), response.verdict(), response.learner_ack().next_turn());
  if (!next.has_value()) return;  // single-turn, or the trajectory ended
  absl::Status status = next->item.status();
  if (status.ok()) {
    status = absl::CancelledError("the rollout worker is stopping");
    absl::MutexLock lock(&follow_up_mu_);
    if (follow_ups_open_) status = engine_->Submit(*std::move(next->item));
  }
  if (status.ok() || stop_.HasBeenNotified()) return;
  // The trajectory cannot go on, so its group cannot complete: give it back.
  metrics_->work_items_rejected.Increment();
  log_.Warning("next turn not sampled; its group is released",
               {{"sample", response.request_id()}, {"error", status.message()}});
  Release(next->group_id, absl::StrCat("next turn not sampled: ", status.message()));
}

void RolloutPipeline::TakeWorkLoop() {
  Backoff backoff(config_.rpc());
  bool said_unimplemented = false;
  while (!stop_.HasBeenNotified()) {
    const std::string worker_id = link_->worker_id();
    const int64_t room = config_.max_concurrent_groups() - engine_->groups_in_flight();
    if (worker_id.empty() || room <= 0) {
      stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100));
      continue;
    }
    SendReleases(worker_id);
    v1::TakeWorkRequest request;
    request.set_worker_id(worker_id);
    request.set_max_groups(static_cast<int32_t>(room));
    request.set_wait_ms(static_cast<int64_t>(config_.take_work_wait_s() * 1000));
    v1::TakeWorkResponse response;
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(config_.take_work_wait_s() + config_.rpc().deadline_s()));
    const grpc::Status status = learner_->TakeWork(&context, request, &response);
    if (!status.ok()) {
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        if (!said_unimplemented) log_.Warning("the learner hands out no work yet (TakeWork unimplemented)");
        said_unimplemented = true;
        backoff.Saturate();
      } else {
        log_.Warning("TakeWork failed", {{"code", static_cast<int>(status.error_code())},
                                         {"error", status.error_message()}});
      }
      stop_.WaitForNotificationWithTimeout(backoff.Next());
      continue;
    }
    backoff.Reset();
    for (v1::WorkItem& item : *response.mutable_items()) {
      const std::string group = item.group_id();
      if (item.warm_up()) {
        VerifyWarmUp(item);  // nothing to sample: no weights needed
        continue;
      }
      if (absl::Status s = weight_sync_->Ensure(item.job_id(), item.min_policy_version(),
                                                response.policy_version());
          !s.ok()) {
        metrics_->work_items_rejected.Increment();
        log_.Error("cannot load the job's weights; work item refused",
                   {{"group", group}, {"job", item.job_id()}, {"error", s.message()}});
        Release(group, absl::StrCat("cannot load the job's weights: ", s.message()));
        continue;
      }
      if (absl::Status s = engine_->Submit(std::move(item)); !s.ok()) {
        metrics_->work_items_rejected.Increment();
        log_.Warning("work item refused", {{"group", group}, {"error", s.message()}});
        Release(group, absl::StrCat("work item refused: ", s.message()));
      }
    }
  }
}

void RolloutPipeline::Release(const std::string& group_id, absl::string_view reason) {
  turns_.DropGroup(group_id);
  absl::MutexLock lock(&release_mu_);
  releases_.emplace_back(group_id, std::string(reason));
}

void RolloutPipeline::SendReleases(const std::string& worker_id) {
  std::vector<std::pair<std::string, std::string>> pending;
  {
    absl::MutexLock lock(&release_mu_);
    pending.swap(releases_);
  }
  std::vector<std::pair<std::string, std::string>> retry;
  for (auto& [group, reason] : pending) {
    v1::ReleaseWorkRequest request;
    request.set_worker_id(worker_id);
    request.set_group_id(group);
    request.set_reason(reason);
    v1::ReleaseWorkResponse response;
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(config_.rpc().deadline_s()));
    const grpc::Status status = learner_->ReleaseWork(&context, request, &response);
    if (status.ok()) {
      metrics_->groups_released.Increment();
      continue;
    }
    switch (status.error_code()) {
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::DEADLINE_EXCEEDED:
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
        retry.emplace_back(std::move(group), std::move(reason));  // the learner may be back later
        break;
      default:
        // Not live any more (the bounded wait got there first, a restarted
        // learner, an old learner without ReleaseWork): nothing to give back.
        log_.Info("group not released", {{"group", group}, {"error", status.error_message()}});
    }
  }
  if (retry.empty()) return;
  absl::MutexLock lock(&release_mu_);
  releases_.insert(releases_.begin(), std::make_move_iterator(retry.begin()),
                   std::make_move_iterator(retry.end()));
}

}  // namespace kforge
