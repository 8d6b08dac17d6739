#include "verifier_worker/funnel/verification.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kforge {
namespace {

// Holds one of the funnel's correctness slots for a scope.
class SlotGuard {
 public:
  SlotGuard(absl::Mutex& mu, absl::CondVar& freed, int& free) : mu_(mu), freed_(freed), free_(free) {
    absl::MutexLock lock(&mu_);
    while (free_ == 0) freed_.Wait(&mu_);
    --free_;
  }
  ~SlotGuard() {
    absl::MutexLock lock(&mu_);
    ++free_;
    freed_.Signal();
  }

 private:
  absl::Mutex& mu_;
  absl::CondVar& freed_;
  int& free_;
};

}  // namespace

std::string HexHash(const std::string& text) {
  return absl::StrFormat("%016x", std::hash<std::string>{}(text));
}

google::protobuf::Value StringList(const std::vector<std::string>& items) {
  google::protobuf::Value value;
  for (const std::string& s : items) value.mutable_list_value()->add_values()->set_string_value(s);
  return value;
}

v1::StageResult* Funnel::Run::Begin(v1::Stage stage) {
  v1::StageResult* result = verdict_.add_stages();
  result->set_stage(stage);
  stage_start_ = absl::Now();
  verdict_.set_stage_reached(stage);
  return result;
}

bool Funnel::Run::End(v1::StageResult* stage, v1::StageOutcome outcome,
                      const std::string& message) {
  stage->set_outcome(outcome);
  stage->set_message(message);
  stage->set_seconds(absl::ToDoubleSeconds(absl::Now() - stage_start_));
  return outcome == v1::OUTCOME_PASSED;
}

void Funnel::Run::AddPart(v1::StageResult* stage, const char* part, absl::Duration d) {
  (*stage->mutable_part_seconds())[part] += absl::ToDoubleSeconds(d);
}

void Funnel::Run::Flag(v1::HackFlag flag, const std::string& detail) {
  verdict_.add_hack_flags(flag);
  verdict_.add_hack_details(detail);
}

bool Funnel::Run::cuda() const { return f_.config_.harness.device.rfind("cuda", 0) == 0; }

const ReferenceSet& Funnel::Run::SetNamed(const std::string& name) const {
  static const ReferenceSet* const kNone = new ReferenceSet();
  if (epoch_ == nullptr) return *kNone;
  auto it = epoch_->sets.find(name);
  return it == epoch_->sets.end() ? *kNone : it->second;
}

bool Funnel::Run::EndWithSessionError(v1::StageResult* stage, const absl::Status& status) {
  if (absl::IsDeadlineExceeded(status)) {
    if (f_.metrics_ != nullptr) f_.metrics_->RecordKill("timeout");
    return End(stage, v1::OUTCOME_TIMED_OUT, std::string(status.message()));
  }
  const CandidateSession& session = *sandbox_->session;
  const CandidateCgroup* cgroup = sandbox_->cgroup.get();
  if (session.exited_cleanly_without_result()) {
    Flag(v1::HACK_RESULT_FORGERY, "the candidate process exited with code 0 before reporting");
  }
  if (f_.metrics_ != nullptr && !session.kill_reason().empty()) {
    f_.metrics_->RecordKill(session.kill_reason());
  }
  std::string message(status.message());
  if (cgroup != nullptr && cgroup->oom_killed()) {
    absl::StrAppend(&message, "; killed by the memory limit of ", limits_.memory_bytes(),
                    " bytes");
    if (f_.metrics_ != nullptr) f_.metrics_->RecordKill("memory");
  } else if (cgroup != nullptr && cgroup->process_limit_hit()) {
    absl::StrAppend(&message, "; it reached the limit of ", limits_.max_processes(),
                    " processes");
    if (f_.metrics_ != nullptr) f_.metrics_->RecordKill("processes");
  }
  return End(stage, v1::OUTCOME_CRASHED, message);
}

bool Funnel::Run::EndWithFailedReply(v1::StageResult* stage, const Frame& reply,
                                     const std::string& context) {
  const std::string flag = reply.GetString("flag");
  const std::string message = absl::StrCat(context, reply.GetString("message"));
  v1::HackFlag parsed;
  if (!flag.empty() && v1::HackFlag_Parse(flag, &parsed)) Flag(parsed, message);
  return End(stage, v1::OUTCOME_FAILED, message);
}

void Funnel::Run::AddDeviceWait(absl::Duration wait) {
  verdict_.set_device_wait_seconds(verdict_.device_wait_seconds() + absl::ToDoubleSeconds(wait));
}

void Funnel::Run::OfferReplyBuffer(Frame& request, uint64_t bytes) {
  if (bytes == 0) return;
  absl::StatusOr<SharedMemory> buffer = SharedMemory::Create("kforge-reply", bytes);
  if (buffer.ok()) request.OfferReplyBuffer(std::make_shared<SharedMemory>(*std::move(buffer)));
}

v1::Verdict Funnel::Run::Execute() {
  const bool ran_static = Static();
  if (ran_static) {
    if (std::optional<v1::Verdict> cached = f_.cache_.Get(cache_key_)) {
      if (f_.metrics_ != nullptr) f_.metrics_->RecordCacheLookup(true);
      cached->set_cached(true);
      // This request's own cost: the lookup, not the verification that made
      // the verdict (whose stages keep their seconds, saying where that
      // went). Copied, a duplicate of a slow candidate looked as slow, and
      // each one counted the first one's wait for the GPU again.
      cached->set_total_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
      cached->set_device_wait_seconds(0);
      return *cached;
    }
    if (f_.metrics_ != nullptr) f_.metrics_->RecordCacheLookup(false);
  }
  const absl::Time reference_asked = absl::Now();
  const bool reference_ready =
      ran_static && options_.last_stage() >= v1::STAGE_COMPILE && PrepareReference();
  if (ran_static && options_.last_stage() >= v1::STAGE_COMPILE) {
    verdict_.set_reference_seconds(absl::ToDoubleSeconds(absl::Now() - reference_asked));
  }
  if (reference_ready) {
    bool correct = false;
    {
      // Correctness runs share the GPU (each request a reader, see
      // AskSharingDevice); timing takes it alone.
      const absl::Time queued = absl::Now();
      SlotGuard slot(f_.slots_mu_, f_.slot_freed_, f_.free_slots_);
      verdict_.set_queue_seconds(absl::ToDoubleSeconds(absl::Now() - queued));
      correct = CompileAndTinyRun() && options_.last_stage() >= v1::STAGE_MULTI_INPUT &&
                MultiInput();
    }
    verdict_.set_correct(correct);
    const bool timed =
        correct && options_.timing().enabled() && options_.last_stage() >= v1::STAGE_TIMING;
    // Without the device lock: torch.compile compiles for seconds on the
    // host, and a waiting writer would stall every candidate behind it; its
    // one short run on the GPU may overlap another candidate's timing,
    // whose trimmed mean and re-check absorb it.
    if (timed) WarmBaselines();
    if (timed) {
      v1::StageResult* stage = nullptr;
      bool measured = false;
      {
        // The task's reference server first, then the GPU (the order every
        // holder of both keeps): the baselines' re-check must not find the
        // server busy with another task while the GPU waits, held alone.
        const absl::Time asked = absl::Now();
        ReferenceClient::Held reference(
            f_.reference_.For(HexHash(request_.task().reference_source())));
        GpuArbiter::Exclusive alone(f_.gpu_);
        // What the stopped requests had queued on the GPU runs out first.
        if (alone.stopped_requests() > 0) {
          absl::SleepFor(absl::Milliseconds(options_.timing().settle_ms()));
        }
        AddDeviceWait(absl::Now() - asked);
        reference_held_ = &reference;
        stage = Begin(v1::STAGE_TIMING);
        measured = MeasureTiming(stage);
        reference_held_ = nullptr;
      }
      if (measured) JudgeTiming(stage);
    }
  }
  return Finish();
}

v1::Verdict Funnel::Run::Finish() {
  sandbox_.reset();
  if (attribution_.has_value() && attribution_->runs() > 0) {
    *verdict_.mutable_attribution() = attribution_->Summary(AttributionEnforced());
  }
  verdict_.set_device(f_.device_name_);
  verdict_.set_total_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  // A verdict that may be the load is kept once a second moment agrees. A
  // moment at which the trusted reference's own host clock ran further ahead
  // of its events than when its baseline was cached (ReferenceBusierNow)
  // neither counts nor is kept: on 4x H100 two moments a few seconds apart,
  // both in a GRPO step's first loaded minute, failed a correct kernel on
  // the clocks, and the cache served that verdict to 138 duplicates.
  if (!internal_error_ && !cache_key_.empty() && options_.use_cache() &&
      (!MayBeTheVerifiersLoad(verdict_, options_.timing().confirm_speedup_below()) ||
       (!measured_.reference_busier &&
        f_.cache_.FailedUnderLoadBefore(cache_key_, started_, absl::Now())))) {
    f_.cache_.Put(cache_key_, verdict_);
  }
  return verdict_;
}

}  // namespace kforge
