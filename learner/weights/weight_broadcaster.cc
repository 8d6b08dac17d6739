#include "learner/weights/weight_broadcaster.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "model/weights/flat_parameters.h"
#include "model/weights/nccl_communicator.h"

namespace kforge {
namespace {

// An open poll looks at its caller's cancellation this often.
constexpr absl::Duration kCancelCheck = absl::Milliseconds(100);

}  // namespace

WeightBroadcaster::WeightBroadcaster(const v1::LearnerConfig& config, LearnerMetrics* metrics)
    : config_(config),
      metrics_(metrics),
      membership_(absl::Seconds(config.broadcast_member_timeout_s()),
                  absl::Seconds(config.broadcast_failure_backoff_s()),
                  absl::Seconds(config.broadcast_failure_backoff_max_s())),
      generation_(absl::ToUnixMillis(absl::Now())) {}

WeightBroadcaster::~WeightBroadcaster() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  changed_.SignalAll();
}

std::string WeightBroadcaster::NotMemberReason() const {
  if (!config_.nccl_broadcast()) return "the learner's nccl_broadcast is off";
  if (!NcclCommunicator::Available()) return "the learner was built without NCCL";
  return "";
}

void WeightBroadcaster::SetSource(FlatParameters* params) {
  if (comm_ != nullptr) metrics_->ObserveBroadcastGroup(0, generation());
  EndGroup();
  source_ = params;
  absl::MutexLock lock(&mu_);
  source_layout_ = params != nullptr ? params->Layout() : "";
  source_device_ = params != nullptr ? NcclCommunicator::DeviceUuid(params->device_index()) : "";
  source_reason_ =
      params != nullptr && params->device_index() < 0 ? "the learner trains on the CPU" : "";
  needs_reform_ = true;
  changed_.SignalAll();
}

void WeightBroadcaster::EndGroup() {
  comm_.reset();
  absl::MutexLock lock(&mu_);
  members_.clear();
  announced_.clear();
  received_.clear();
  forming_ = false;
}

absl::Status WeightBroadcaster::Broadcast(const std::string& job_id, int64_t version) {
  if (source_ == nullptr || !NotMemberReason().empty()) return absl::OkStatus();
  std::vector<std::string> eligible;
  bool reform = false;
  {
    absl::MutexLock lock(&mu_);
    if (!source_reason_.empty()) return absl::OkStatus();
    eligible = membership_.Eligible(source_layout_, source_device_, absl::Now());
    reform = needs_reform_ || comm_ == nullptr || eligible != members_;
  }
  if (eligible.empty()) {
    if (comm_ != nullptr) {
      log_.Info("weight-broadcast group ended: no rollout worker takes part", {});
      metrics_->ObserveBroadcastGroup(0, generation());
    }
    EndGroup();
    return absl::OkStatus();
  }
  if (reform) {
    if (absl::Status formed = Reform(eligible); !formed.ok()) return formed;
  }
  int64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    generation = generation_;
    // What every member has received is no longer needed.
    int64_t everyone_has = sequence_;
    for (const std::string& member : members_) {
      auto it = received_.find(member);
      everyone_has = std::min(everyone_has, it == received_.end() ? 0 : it->second);
    }
    while (!announced_.empty() && announced_.front().sequence() <= everyone_has) {
      announced_.pop_front();
    }
    v1::WeightBroadcast announcement;
    announcement.set_generation(generation_);
    announcement.set_sequence(++sequence_);
    announcement.set_job_id(job_id);
    announcement.set_version(version);
    announcement.set_timeout_ms(static_cast<int64_t>(config_.broadcast_timeout_s() * 1000));
    announced_.push_back(std::move(announcement));
    changed_.SignalAll();
  }
  const absl::Time started = absl::Now();
  absl::Status sent = comm_->Broadcast(*source_, /*root=*/0, config_.broadcast_bucket_bytes(),
                                       absl::Seconds(config_.broadcast_timeout_s()));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - started);
  metrics_->ObserveBroadcast(sent.ok(), seconds, sent.ok() ? source_->bytes() : 0);
  if (sent.ok()) return absl::OkStatus();
  comm_.reset();
  {
    absl::MutexLock lock(&mu_);
    membership_.Suspect(members_, absl::Now());
    announced_.clear();
    needs_reform_ = true;
  }
  return absl::Status(sent.code(),
                      absl::StrCat("weight broadcast of version ", version, " to ", eligible.size(),
                                   " rollout worker(s) (group generation ", generation,
                                   "): ", sent.message(), "; the group re-forms at the next update"));
}

absl::Status WeightBroadcaster::Reform(const std::vector<std::string>& members) {
  comm_.reset();
  absl::StatusOr<std::string> id = NcclCommunicator::NewUniqueId();
  if (!id.ok()) return id.status();
  int64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    generation = ++generation_;
    members_ = members;
    unique_id_ = *id;
    announced_.clear();
    received_.clear();
    refused_.clear();
    sequence_ = 0;
    forming_ = true;
    needs_reform_ = false;
    changed_.SignalAll();
  }
  const absl::Time started = absl::Now();
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> comm =
      NcclCommunicator::Join(*id, /*rank=*/0, static_cast<int>(members.size()) + 1,
                             source_->device_index(),
                             absl::Seconds(config_.broadcast_form_timeout_s()));
  {
    absl::MutexLock lock(&mu_);
    forming_ = false;
    if (comm.ok()) {
      membership_.Formed(members_);
    } else {
      membership_.Suspect(members_, absl::Now());
      members_.clear();
      needs_reform_ = true;
    }
  }
  if (!comm.ok()) {
    metrics_->ObserveBroadcastGroup(-1, generation);
    return absl::Status(comm.status().code(),
                        absl::StrCat("weight-broadcast group generation ", generation, " of ",
                                     members.size(), " rollout worker(s) (",
                                     absl::StrJoin(members, ", "),
                                     ") did not form: ", comm.status().message()));
  }
  comm_ = *std::move(comm);
  metrics_->ObserveBroadcastGroup(static_cast<int>(members.size()), generation);
  log_.Info("weight-broadcast group formed",
            {{"generation", generation}, {"workers", absl::StrJoin(members, ",")},
             {"seconds", absl::ToDoubleSeconds(absl::Now() - started)}});
  return absl::OkStatus();
}

bool WeightBroadcaster::News(const v1::SyncBroadcastRequest& request,
                             v1::SyncBroadcastResponse* response) const {
  if (shutting_down_) return true;
  if (!source_reason_.empty()) {
    response->set_not_member_reason(source_reason_);
    return true;
  }
  if (!source_layout_.empty() && request.layout() != source_layout_) {
    response->set_not_member_reason(absl::StrCat("the worker's parameter layout ", request.layout(),
                                                 " differs from the learner's ", source_layout_));
    return true;
  }
  if (!source_device_.empty() && request.device_uuid() == source_device_) {
    response->set_not_member_reason(absl::StrCat(
        "the worker is on the learner's GPU (", source_device_, "); NCCL needs a GPU per rank"));
    return true;
  }
  auto member = std::find(members_.begin(), members_.end(), request.worker_id());
  if (member == members_.end()) return false;
  if (forming_ && request.generation() != generation_ && !refused_.contains(request.worker_id())) {
    v1::BroadcastGroup* group = response->mutable_group();
    group->set_generation(generation_);
    group->set_rank(static_cast<int32_t>(member - members_.begin()) + 1);
    group->set_world_size(static_cast<int32_t>(members_.size()) + 1);
    group->set_nccl_unique_id(unique_id_);
    group->set_bucket_bytes(config_.broadcast_bucket_bytes());
    group->set_timeout_ms(static_cast<int64_t>(config_.broadcast_form_timeout_s() * 1000));
    return true;
  }
  if (forming_ || request.generation() != generation_) return false;
  for (const v1::WeightBroadcast& broadcast : announced_) {
    if (broadcast.sequence() > request.received_sequence()) {
      *response->mutable_broadcast() = broadcast;
      return true;
    }
  }
  return false;
}

absl::Status WeightBroadcaster::Sync(const v1::SyncBroadcastRequest& request, absl::Duration wait,
                                     const std::function<bool()>& cancelled,
                                     v1::SyncBroadcastResponse* response) {
  if (request.worker_id().empty()) return absl::InvalidArgumentError("worker_id: is required");
  if (std::string reason = NotMemberReason(); !reason.empty()) {
    response->set_not_member_reason(std::move(reason));
    return absl::OkStatus();
  }
  const std::string& worker = request.worker_id();
  const absl::Time end = absl::Now() + wait;
  absl::MutexLock lock(&mu_);
  membership_.PollStarted(worker, request.layout(), request.device_uuid(), absl::Now());
  const bool member = IsMember(worker);
  if (!request.error().empty()) {
    log_.Warning("a rollout worker left the weight-broadcast group",
                 {{"worker", worker}, {"generation", request.failed_generation()},
                  {"error", request.error()}});
    if (request.join_failed()) {
      membership_.Failed(worker, absl::Now());
      if (request.failed_generation() == generation_) refused_.insert(worker);
    }
  }
  if (member && request.generation() == generation_) {
    received_[worker] = std::max(received_[worker], request.received_sequence());
  }
  // A member that no longer holds the formed group (it failed, or it
  // restarted) would leave the next broadcast waiting: re-form first.
  if (member && !forming_ && request.generation() != generation_) needs_reform_ = true;
  while (!News(request, response)) {
    if (cancelled()) {
      membership_.Remove(worker);
      if (member) needs_reform_ = true;
      return absl::CancelledError("the worker went away");
    }
    const absl::Time now = absl::Now();
    if (now >= end) break;
    changed_.WaitWithDeadline(&mu_, std::min(end, now + kCancelCheck));
  }
  membership_.PollEnded(worker, absl::Now());
  return absl::OkStatus();
}

void WeightBroadcaster::Remove(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  membership_.Remove(worker_id);
  if (IsMember(worker_id)) needs_reform_ = true;
}

bool WeightBroadcaster::IsMember(const std::string& worker_id) const {
  return std::find(members_.begin(), members_.end(), worker_id) != members_.end();
}

int64_t WeightBroadcaster::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

std::vector<std::string> WeightBroadcaster::members() const {
  absl::MutexLock lock(&mu_);
  return members_;
}

}  // namespace kforge
