#include "rollout_worker/sampler/rollout_engine.h"

#include <pthread.h>

#include <memory>
#include <optional>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "model/sampling/sampling_params.h"
#include "model/sampling/stop_matcher.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/transformer/decoder_model.h"
#include "prompts/trajectory_end.h"

namespace kforge {
namespace {

// A follow-up turn (WorkItem.turn > 0) is one sequence continuing
// trajectory trajectory_index of its group.
int32_t IndexInGroup(const v1::WorkItem& item, int index) {
  return item.turn() > 0 ? item.trajectory_index() : index;
}

std::string SampleId(const v1::WorkItem& item, int index) {
  return TurnSampleId(item.job_id(), item.group_id(), IndexInGroup(item, index), item.turn());
}

// The generator's name for the item: its group id, and for a follow-up turn
// the trajectory and turn too, as other turns of the group run beside it.
std::string EngineKey(const v1::WorkItem& item) {
  return item.turn() > 0
             ? absl::StrCat(item.group_id(), "/", item.trajectory_index(), "/t", item.turn())
             : item.group_id();
}

absl::flat_hash_set<int32_t> EosIds(const ModelConfig& config, const BpeTokenizer& tokenizer) {
  absl::flat_hash_set<int32_t> eos;
  for (int64_t id : config.eos_token_ids) eos.insert(static_cast<int32_t>(id));
  if (eos.empty()) {
    for (const char* token : {"<|im_end|>", "<|endoftext|>"}) {
      if (std::optional<int32_t> id = tokenizer.TokenId(token)) eos.insert(*id);
    }
  }
  return eos;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RolloutEngine>> RolloutEngine::Create(
    const DecoderModel* model, const BpeTokenizer* tokenizer, Options options,
    SampleCallback on_sample, DroppedCallback on_dropped) {
  KF_ASSIGN_OR_RETURN(std::unique_ptr<Generator> generator,
                      Generator::Create(model, tokenizer,
                                        {.slots = options.slots,
                                         .max_len = options.max_len,
                                         .decode = options.decode}));
  auto engine = std::unique_ptr<RolloutEngine>(new RolloutEngine(
      tokenizer, std::move(options), std::move(generator), EosIds(model->config(), *tokenizer),
      std::move(on_sample), std::move(on_dropped)));
  engine->vocab_size_ = model->config().vocab_size;
  engine->thread_ = std::thread([e = engine.get()] {
    pthread_setname_np(pthread_self(), "kf-sampler");
    e->Loop();
  });
  return engine;
}

RolloutEngine::RolloutEngine(const BpeTokenizer* tokenizer, Options options,
                             std::unique_ptr<Generator> gen, absl::flat_hash_set<int32_t> eos,
                             SampleCallback on_sample, DroppedCallback on_dropped)
    : tokenizer_(tokenizer),
      options_(std::move(options)),
      generator_(std::move(gen)),
      eos_(std::move(eos)),
      on_sample_(std::move(on_sample)),
      on_dropped_(std::move(on_dropped)) {}

RolloutEngine::~RolloutEngine() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status RolloutEngine::Submit(v1::WorkItem item) {
  if (item.job_id().empty()) return absl::InvalidArgumentError("work item job_id: is required");
  if (item.group_id().empty()) return absl::InvalidArgumentError("work item group_id: is required");
  const std::string name = absl::StrCat("work item ", item.group_id());
  if (item.group_size() < 1 || item.group_size() > options_.slots) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": group_size ", item.group_size(),
                                                   " outside [1, ", options_.slots, "]"));
  }
  if (item.prompt_tokens().empty() && item.prompt_text().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": neither prompt_tokens nor prompt_text"));
  }
  for (int32_t token : item.prompt_tokens()) {
    if (token < 0 || token >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": prompt token ", token,
                                                     " outside [0, ", vocab_size_, ")"));
    }
  }
  absl::Status sampling = RowSamplingParamsFromProto(item.sampling(), SampleId(item, 0)).status();
  if (!sampling.ok()) return absl::InvalidArgumentError(absl::StrCat(name, ": ", sampling.message()));
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::CancelledError("the rollout engine is stopping");
  const std::string key = EngineKey(item);
  if (groups_.contains(key)) {
    return absl::AlreadyExistsError(absl::StrCat(name, ": already in flight"));
  }
  groups_[key] = Group{item, 0, item.group_size()};
  inbox_.push_back(std::move(item));
  return absl::OkStatus();
}

void RolloutEngine::RunBetweenSteps(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  between_steps_.push_back(std::move(fn));
}

bool RolloutEngine::RunBetweenStepsAndWait(std::function<void()> fn,
                                           const absl::Notification& stop) {
  auto ran = std::make_shared<absl::Notification>();
  RunBetweenSteps([fn = std::move(fn), ran] {
    fn();
    ran->Notify();
  });
  // In slices, so a stopping caller does not wait for a sampler that may be
  // blocked (a full dispatcher) until the engine goes.
  while (!ran->WaitForNotificationWithTimeout(absl::Milliseconds(200))) {
    if (stop.HasBeenNotified()) return false;
  }
  return true;
}

int64_t RolloutEngine::groups_in_flight() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(groups_.size());
}

absl::StatusOr<GroupRequest> RolloutEngine::ToRequest(const v1::WorkItem& item) const {
  GroupRequest request;
  request.group_id = EngineKey(item);
  if (item.prompt_tokens().empty()) {
    request.prompt_tokens = tokenizer_->Encode(item.prompt_text());
  } else {
    request.prompt_tokens.assign(item.prompt_tokens().begin(), item.prompt_tokens().end());
  }
  for (int i = 0; i < item.group_size(); ++i) {
    KF_ASSIGN_OR_RETURN(RowSamplingParams params,
                        RowSamplingParamsFromProto(item.sampling(), SampleId(item, i)));
    request.samples.push_back(params);
  }
  KF_ASSIGN_OR_RETURN(request.stop, StopConditionsFromProto(item.sampling(), eos_));
  return request;
}

void RolloutEngine::Loop() {
  for (;;) {
    std::deque<v1::WorkItem> items;
    std::deque<std::function<void()>> closures;
    {
      absl::MutexLock lock(&mu_);
      const bool busy = !generator_->idle();
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return busy || stopping_ || !inbox_.empty() || !between_steps_.empty();
      };
      if (!ready()) {
        sampler_clock_.Enter(kIdle, absl::Now());
        mu_.Await(absl::Condition(&ready));
      }
      if (stopping_) break;
      closures.swap(between_steps_);
    }
    // Closures first: new items then start on the weights they applied, and
    // a closure that drops everything (DropAll) drops those queued too. The
    // decode step still in flight reads the weights a closure may rewrite
    // (from another stream, for NCCL): let it finish first.
    if (!closures.empty()) {
      sampler_clock_.Enter(kBetweenSteps, absl::Now());
      if (absl::Status settled = generator_->WaitForDevice(); !settled.ok()) DropRunning(settled);
    }
    for (std::function<void()>& fn : closures) fn();
    sampler_clock_.Enter(kGenerating, absl::Now());
    {
      absl::MutexLock lock(&mu_);
      items.swap(inbox_);
    }
    std::vector<std::pair<v1::WorkItem, absl::Status>> dropped;
    for (v1::WorkItem& item : items) {
      absl::StatusOr<GroupRequest> request =
          unusable_weights_.ok() ? ToRequest(item) : absl::StatusOr<GroupRequest>(unusable_weights_);
      std::vector<int32_t> prompt;
      if (request.ok()) prompt = request->prompt_tokens;
      const absl::Time enqueued = absl::Now();
      absl::Status queued = request.ok() ? generator_->Enqueue(*std::move(request)) : request.status();
      absl::MutexLock lock(&mu_);
      if (queued.ok()) {
        Group& group = groups_[EngineKey(item)];
        group.enqueued = enqueued;
        group.policy_version = policy_version_;
        group.prompt_tokens = std::move(prompt);
      } else {
        groups_.erase(EngineKey(item));
        dropped.emplace_back(std::move(item), std::move(queued));
      }
    }
    for (const auto& [item, status] : dropped) on_dropped_(item, status);
    if (generator_->idle()) continue;
    absl::StatusOr<std::vector<GeneratedSample>> done = generator_->Step();
    if (!done.ok()) {
      DropRunning(done.status());
      continue;
    }
    for (GeneratedSample& sample : *done) Emit(std::move(sample));
  }
  generator_->Abandon();
}

RolloutEngine::SamplerTimes RolloutEngine::sampler_times() const {
  const std::vector<absl::Duration> totals = sampler_clock_.Totals(absl::Now());
  return {.generating = totals[kGenerating],
          .between_steps = totals[kBetweenSteps],
          .idle = totals[kIdle]};
}

void RolloutEngine::DropRunning(const absl::Status& why) {
  for (const std::string& group_id : generator_->Abandon()) {
    std::optional<v1::WorkItem> item;
    {
      absl::MutexLock lock(&mu_);
      auto it = groups_.find(group_id);
      if (it == groups_.end()) continue;
      item = std::move(it->second.item);
      groups_.erase(it);
    }
    on_dropped_(*item, why);
  }
}

void RolloutEngine::DropAll(const absl::Status& why) {
  unusable_weights_ = why;
  DropRunning(why);
  std::deque<v1::WorkItem> queued;
  {
    absl::MutexLock lock(&mu_);
    queued.swap(inbox_);
    for (const v1::WorkItem& item : queued) groups_.erase(EngineKey(item));
  }
  for (const v1::WorkItem& item : queued) on_dropped_(item, why);
}

void RolloutEngine::Emit(GeneratedSample generated) {
  v1::WorkItem item;
  std::vector<int32_t> prompt;
  int64_t version = 0;
  absl::Time enqueued;
  {
    absl::MutexLock lock(&mu_);
    auto it = groups_.find(generated.group_id);
    if (it == groups_.end()) return;
    Group& group = it->second;
    version = group.policy_version;
    enqueued = group.enqueued;
    if (--group.remaining == 0) {
      item = std::move(group.item);
      prompt = std::move(group.prompt_tokens);
      groups_.erase(it);
    } else {
      item = group.item;
      prompt = group.prompt_tokens;
    }
  }
  v1::Sample sample;
  v1::SampleKey* key = sample.mutable_key();
  key->set_sample_id(SampleId(item, generated.index));
  key->set_job_id(item.job_id());
  key->set_group_id(item.group_id());
  key->set_index_in_group(IndexInGroup(item, generated.index));
  key->set_turn(item.turn());
  sample.set_task_id(item.task().id());
  sample.set_policy_version(version);
  sample.mutable_prompt_tokens()->Add(prompt.begin(), prompt.end());
  sample.mutable_completion_tokens()->Add(generated.tokens.begin(), generated.tokens.end());
  sample.mutable_completion_logprobs()->Add(generated.logprobs.begin(), generated.logprobs.end());
  sample.set_prompt_text(item.prompt_text());
  sample.set_completion_text(generated.text);
  sample.set_finish_reason(std::string(FinishReasonName(generated.finish_reason)));
  sample.set_rollout_worker_id(options_.worker_id);
  sample.set_finished_at_us(absl::ToUnixMicros(absl::Now()));
  // Generation starts at admission, not at Enqueue: time in the
  // generator's queue is the worker being full, not the sample generating.
  sample.set_started_at_us(absl::ToUnixMicros(enqueued + generated.queued));
  on_sample_(std::move(sample), item, generated.time_to_first_token);
}

}  // namespace kforge
