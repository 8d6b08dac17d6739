// Stages 2-4 in the candidate's sandbox: compile (the module runs, the model
// builds, kernels compile), the tiny run, and the multi-input comparison
// against the epoch's reference outputs (on a GPU, the variant sets' shapes
// warmed up first so their recompiles overlap). Every compared run is also
// a recorded one (harness launch_record.py): what forward launched is
// attributed here, and library compute standing in for the candidate's own
// kernels fails the stage when attribution is enforced.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "verifier_worker/funnel/verification.h"
#include "verifier_worker/funnel/warm_list.h"

namespace kforge {
namespace {

uint64_t Bytes(const std::vector<TensorEntry>& tensors) {
  uint64_t total = 0;
  for (const TensorEntry& e : tensors) total += e.nbytes;
  return total;
}

// The sets stage 4 runs, in order: the task's own inputs first (most
// candidates that are wrong are wrong there), then the rest from the
// cheapest to move and run; with `warmed_last`, the sets a background
// warm-up compiles for (those in `warmed`) after all the others.
std::vector<const ReferenceSet*> MultiInputOrder(const ReferenceEpoch& epoch,
                                                 const std::set<std::string>& warmed,
                                                 bool warmed_last) {
  std::vector<const ReferenceSet*> order;
  for (const InputSetSpec& spec : epoch.plan.sets) {
    auto it = epoch.sets.find(spec.name);
    if (it != epoch.sets.end() && it->second.ok) order.push_back(&it->second);
  }
  std::stable_sort(order.begin(), order.end(), [&](const ReferenceSet* a, const ReferenceSet* b) {
    const bool a_own = a->spec.name == "task_inputs", b_own = b->spec.name == "task_inputs";
    if (a_own != b_own) return a_own;
    if (warmed_last) {
      const bool a_warmed = warmed.contains(a->spec.name),
                 b_warmed = warmed.contains(b->spec.name);
      if (a_warmed != b_warmed) return b_warmed;
    }
    return Bytes(a->inputs) + Bytes(a->outputs) < Bytes(b->inputs) + Bytes(b->outputs);
  });
  return order;
}

// One set's run request, sent from a thread of its own so the previous
// set's outputs are compared while the candidate runs this one
// (Funnel::Run::MultiInput). Its result is taken with Wait(); dropped
// without it (the stage ended on an earlier set), the candidate's process
// group is killed, so a candidate that hangs on this set costs nothing,
// and the thread joined. The sandbox is not used again after that.
class SetRequestInFlight {
 public:
  SetRequestInFlight(int pgid, std::function<DeviceReply()> ask)
      : pgid_(pgid), thread_([this, ask = std::move(ask)] {
          pthread_setname_np(pthread_self(), "kf-set-request");
          result_ = ask();
        }) {}
  SetRequestInFlight(const SetRequestInFlight&) = delete;
  SetRequestInFlight& operator=(const SetRequestInFlight&) = delete;
  ~SetRequestInFlight() {
    if (!thread_.joinable()) return;
    ::kill(-pgid_, SIGKILL);
    thread_.join();
  }
  DeviceReply Wait() {
    thread_.join();
    return std::move(result_);
  }

 private:
  const int pgid_;
  DeviceReply result_;
  std::thread thread_;  // last: it starts once the fields above exist
};

}  // namespace

int Funnel::Run::RepeatOf(const ReferenceSet& set) const {
  // Self-consistency and input mutation are checked on the task's own
  // inputs: twice the outputs and the inputs back for every set would
  // double what crosses between the processes for little more evidence.
  return options_.check_self_consistency() && set.spec.name == "task_inputs" ? 2 : 1;
}

bool Funnel::Run::AttributionEnforced() const {
  switch (options_.attribution()) {
    case v1::ATTRIBUTION_ENFORCE: return true;
    case v1::ATTRIBUTION_REPORT:
    case v1::ATTRIBUTION_OFF: return false;
    default: return options_.require_triton();
  }
}

bool Funnel::Run::Attribute(v1::StageResult* stage, const google::protobuf::Value* launches,
                            const std::string& where) {
  if (!attribution_.has_value() || launches == nullptr) return true;
  const LaunchAttribution::RunFacts facts = attribution_->Add(*launches);
  if (!AttributionEnforced()) return true;
  // Judged per run: a long decoy kernel in another run cannot dilute it.
  if (cuda() && facts.host_transfer_us > options_.max_host_transfer_us()) {
    const std::string detail = absl::StrFormat(
        "forward copied data between the GPU and the host for %.0f us on %s (over %.0f us: "
        "the work must run in the candidate's own Triton kernels, not on the host)",
        facts.host_transfer_us, where, options_.max_host_transfer_us());
    Flag(v1::HACK_TORCH_FALLBACK, detail);
    return End(stage, v1::OUTCOME_FAILED, detail);
  }
  const std::vector<std::string> compute =
      attribution_->LibraryCompute(cuda() ? LaunchKind::kKernel : LaunchKind::kOp);
  if (compute.empty()) return true;
  constexpr size_t kNamed = 4;
  std::vector<std::string> named(compute.begin(),
                                 compute.begin() + std::min(kNamed, compute.size()));
  for (std::string& name : named) {
    if (name.size() > 120) name = absl::StrCat(name.substr(0, 117), "...");
  }
  const std::string detail = absl::StrCat(
      "forward ran library compute on ", where, ": ", absl::StrJoin(named, "; "),
      compute.size() > kNamed ? absl::StrCat(" and ", compute.size() - kNamed, " more") : "",
      " (the work must run in the candidate's own Triton kernels)");
  Flag(v1::HACK_TORCH_FALLBACK, detail);
  return End(stage, v1::OUTCOME_FAILED, detail);
}

DeviceReply Funnel::Run::AskSharingDeviceFromAnyThread(const Frame& request,
                                                       absl::Duration timeout,
                                                       bool preemptible) const {
  // Held for the request only, not for the comparison here nor across a
  // candidate's sets: a candidate waiting to be timed waits for one
  // request of each candidate in flight, not for their whole stages.
  // A timing may stop the candidate in the middle of it: the stopped time
  // is waiting for the GPU too, and does not count against the deadline.
  DeviceReply done;
  const absl::Time sent = absl::Now();
  {
    GpuArbiter::Shared use(f_.gpu_, sandbox_->session->pid(), &done.waited, preemptible);
    done.reply = sandbox_->session->Request(request, timeout, [&use] { return use.stopped(); });
    done.waited += use.stopped();
  }
  done.round_trip = absl::Now() - sent;
  return done;
}

DeviceReply Funnel::Run::AskSharingDevice(const Frame& request, absl::Duration timeout,
                                          bool preemptible) {
  DeviceReply done = AskSharingDeviceFromAnyThread(request, timeout, preemptible);
  AddDeviceWait(done.waited);
  return done;
}

const ReferenceSet& Funnel::Run::TinySet() const {
  // Tiny inputs if the reference supports them, else the task's own.
  return SetNamed("tiny").ok ? SetNamed("tiny") : SetNamed("task_inputs");
}

bool Funnel::Run::CompileAndTinyRun() {
  v1::StageResult* stage = Begin(v1::STAGE_COMPILE);
  const absl::Time asked = absl::Now();
  absl::StatusOr<std::unique_ptr<CandidateSandbox>> sandbox = f_.sandboxes_->Take(limits_);
  AddPart(stage, "sandbox", absl::Now() - asked);
  if (!sandbox.ok()) {
    internal_error_ = true;
    return End(stage, v1::OUTCOME_INTERNAL_ERROR, std::string(sandbox.status().message()));
  }
  sandbox_ = *std::move(sandbox);
  if (f_.metrics_ != nullptr) f_.metrics_->RecordSandbox(sandbox_->was_spare);
  if (options_.attribution() != v1::ATTRIBUTION_OFF) {
    attribution_.emplace(own_kernels_,
                         std::vector<std::string>(request_.task().allowed_library_ops().begin(),
                                                  request_.task().allowed_library_ops().end()));
  }
  const absl::Duration timeout = absl::Seconds(limits_.correctness_timeout_s());
  const ReferenceSet& tiny = TinySet();
  Frame compile = Frame::Of("compile");
  compile.Set("poison_bytes", static_cast<int64_t>(Bytes(tiny.outputs)));
  compile.Set("source", code_)
      .Set("init_inputs", tiny.init_inputs)
      .Set("init_seed", static_cast<int64_t>(epoch_->init_seed))
      .Set("set", tiny.spec.name)
      .Set("dtype", tiny.spec.dtype)
      .Set("attribute", attribution_.has_value());
  AttachInputs(tiny, epoch_->prepared, compile);
  OfferReplyBuffer(compile, ReplyBytes(tiny, 1, /*with_inputs=*/true));
  const DeviceReply compiled = AskSharingDevice(compile, timeout);
  AddPart(stage, "compile_request", compiled.own());
  const absl::StatusOr<Frame>& reply = compiled.reply;
  if (reply.ok()) f_.launchers_.Offer(reply->Get("launchers"));
  if (!reply.ok()) return EndWithSessionError(stage, reply.status());
  if (reply->type() == "failed") return EndWithFailedReply(stage, *reply, "");
  End(stage, v1::OUTCOME_PASSED);
  if (options_.last_stage() < v1::STAGE_TINY_RUN) return false;

  stage = Begin(v1::STAGE_TINY_RUN);
  if (!Attribute(stage, reply->Get("launches"), tiny.DisplayName())) return false;
  const absl::Time compared = absl::Now();
  const SetCheck check =
      CheckCandidateOutputs(tiny, epoch_->prepared, *reply, 1, /*check_inputs=*/true,
                            options_.tolerances());
  for (const auto& [flag, detail] : check.flags) Flag(flag, detail);
  AddPart(stage, "compare", absl::Now() - compared);
  RecordSet(check.result, compiled.own(), absl::Now() - compared, *reply);
  if (!check.result.passed()) {
    return End(stage, v1::OUTCOME_FAILED,
               absl::StrCat(tiny.spec.name, " inputs: ", check.result.message()));
  }
  return End(stage, v1::OUTCOME_PASSED);
}

void Funnel::Run::RecordSet(const v1::InputSetResult& result, absl::Duration round_trip,
                            absl::Duration compare, const Frame& reply) {
  v1::InputSetResult* recorded = verdict_.add_input_sets();
  *recorded = result;
  recorded->set_seconds(absl::ToDoubleSeconds(round_trip));
  recorded->set_compare_seconds(absl::ToDoubleSeconds(compare));
  recorded->set_call_seconds(reply.GetNumber("call_s"));
}

bool Funnel::Run::WarmVariantSets(v1::StageResult* stage, absl::Duration timeout,
                                  bool background) {
  google::protobuf::Value sets = WarmList(*epoch_, TinySet());
  if (sets.list_value().values_size() == 0) return true;
  Frame warm = Frame::Of("warm");
  warm.Set("sets", std::move(sets)).Set("background", background);
  if (background) {
    warm.Set("copy_max_bytes", options_.multi_input().warm_copy_max_bytes());
  }
  // Preemptible: it is mostly host compiles, and a timing waiting for it to
  // end would hold the GPU idle for them (a GRPO-shaped batch took 20%
  // longer on one H100 when it did).
  const DeviceReply warmed = AskSharingDevice(warm, timeout, /*preemptible=*/true);
  AddPart(stage, background ? "warm_start" : "warm", warmed.own());
  const absl::StatusOr<Frame>& reply = warmed.reply;
  if (!reply.ok()) return EndWithSessionError(stage, reply.status());
  if (reply->type() == "failed") return EndWithFailedReply(stage, *reply, "warm-up: ");
  if (const google::protobuf::Value* error = reply->Get("warm_error"); error != nullptr) {
    const auto& f = error->struct_value().fields();
    auto text = [&f](const char* key) {
      auto it = f.find(key);
      return it == f.end() ? std::string() : it->second.string_value();
    };
    return End(stage, v1::OUTCOME_FAILED,
               absl::StrCat(text("set"), " inputs: ", text("message"),
                            " (raised while its shapes compiled, on inputs of the same shapes; "
                            "the GPU was unusable after it)"));
  }
  return true;
}

bool Funnel::Run::MultiInput() {
  v1::StageResult* stage = Begin(v1::STAGE_MULTI_INPUT);
  const absl::Duration timeout = absl::Seconds(limits_.correctness_timeout_s());
  const v1::MultiInputOptions& multi = options_.multi_input();
  const bool warm = cuda() && multi.warm_variant_sets();
  const std::set<std::string> recompiling =
      warm ? RecompilingSets(*epoch_, TinySet()) : std::set<std::string>();
  // Background: started before the task's own inputs run, so the
  // recompiling sets' compiles overlap that set's compile as well as the
  // plain sets; the recompiling sets run last, after it (the sandbox waits
  // for it on their request). Not for a candidate that autotunes: Triton's
  // Autotuner keeps per-call state on its (module-level) object, so a
  // recorded run autotuning a new size beside a warm-up thread of the same
  // kernel could fail an honest candidate. The word anywhere in its source
  // is enough to stay safe.
  const bool autotunes = absl::StrContains(code_, "autotune");
  const bool background = warm && multi.overlap_warm_up() && !autotunes && !recompiling.empty() &&
                          epoch_->sets.contains("task_inputs") &&
                          epoch_->sets.at("task_inputs").ok;
  if (warm && !background && !WarmVariantSets(stage, timeout, /*background=*/false)) {
    return false;
  }
  const std::vector<const ReferenceSet*> order =
      MultiInputOrder(*epoch_, recompiling, background);
  // Keeps the candidate's process running between its requests while the
  // background warm-up compiles; a timing stops it (preemptible). Declared
  // before the request in flight, so that request is ended first.
  std::optional<GpuArbiter::Shared> warm_hold;
  // The next set's request goes out before this one's outputs are compared
  // here: the candidate runs it meanwhile. One set more than needed runs
  // when a set fails; its process is then killed, not waited for.
  std::optional<SetRequestInFlight> in_flight;
  auto send = [&](const ReferenceSet& set) {
    const bool own = set.spec.name == "task_inputs";
    Frame run = Frame::Of("run");
    run.Set("set", set.spec.name).Set("init_inputs", set.init_inputs)
        .Set("repeat", RepeatOf(set)).Set("dtype", set.spec.dtype).Set("return_inputs", own)
        .Set("attribute", attribution_.has_value())
        .Set("after_warm", background && recompiling.contains(set.spec.name))
        .Set("poison_bytes", static_cast<int64_t>(Bytes(set.outputs)));
    AttachInputs(set, epoch_->prepared, run);
    OfferReplyBuffer(run, ReplyBytes(set, RepeatOf(set), /*with_inputs=*/own));
    in_flight.emplace(sandbox_->session->pid(), [this, run = std::move(run), timeout] {
      return AskSharingDeviceFromAnyThread(run, timeout, /*preemptible=*/false);
    });
  };
  if (background) {
    absl::Duration held_after;
    warm_hold.emplace(f_.gpu_, sandbox_->session->pid(), &held_after, /*preemptible=*/true);
    AddDeviceWait(held_after);
    if (!WarmVariantSets(stage, timeout, /*background=*/true)) return false;
  }
  if (!order.empty()) send(*order.front());
  int passed = 0;
  bool task_inputs_passed = false;
  for (size_t i = 0; i < order.size(); ++i) {
    const ReferenceSet* set = order[i];
    const std::string& name = set->spec.name;
    const bool own = name == "task_inputs";
    DeviceReply done = in_flight->Wait();
    in_flight.reset();
    AddDeviceWait(done.waited);
    AddPart(stage, "sets", done.own());
    if (!done.reply.ok()) return EndWithSessionError(stage, done.reply.status());
    const Frame& reply = *done.reply;
    f_.launchers_.Offer(reply.Get("launchers"));
    if (reply.type() == "failed") {
      return EndWithFailedReply(stage, reply, absl::StrCat(name, " inputs: "));
    }
    if (i + 1 < order.size()) send(*order[i + 1]);
    if (!Attribute(stage, reply.Get("launches"), set->DisplayName())) return false;
    const absl::Time compared = absl::Now();
    const SetCheck check = CheckCandidateOutputs(*set, epoch_->prepared, reply, RepeatOf(*set),
                                                 own, options_.tolerances());
    for (const auto& [flag, detail] : check.flags) Flag(flag, detail);
    AddPart(stage, "compare", absl::Now() - compared);
    RecordSet(check.result, done.own(), absl::Now() - compared, reply);
    if (!check.result.passed()) {
      if (task_inputs_passed && !set->spec.same_shape) {
        Flag(v1::HACK_EXACT_SHAPE_ONLY,
             absl::StrCat("right on the task's own shapes, wrong on ", name));
      }
      return End(stage, v1::OUTCOME_FAILED,
                 absl::StrCat(name, " inputs: ", check.result.message()));
    }
    ++passed;
    if (own) task_inputs_passed = true;
  }
  const int needed =
      std::min(options_.multi_input().min_input_sets(), static_cast<int>(order.size()));
  if (passed < needed) {
    return End(stage, v1::OUTCOME_FAILED,
               absl::StrCat(passed, " input sets passed; ", needed, " are required"));
  }
  // A kernel written but never run: the outputs came from somewhere else.
  if (attribution_.has_value() && AttributionEnforced() && cuda() && options_.require_triton() &&
      attribution_->SawGpuWork() && !attribution_->OwnKernelRan()) {
    const std::string detail =
        "none of the candidate's own Triton kernels ran on the GPU during its correctness runs";
    Flag(v1::HACK_KERNELS_NOT_RUN, detail);
    return End(stage, v1::OUTCOME_FAILED, detail);
  }
  return End(stage, v1::OUTCOME_PASSED);
}

}  // namespace kforge
