#include "verifier_worker/funnel/funnel.h"

#include <filesystem>
#include <functional>
#include <optional>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/config/proto_defaults.h"
#include "common/status_macros.h"
#include "verifier_worker/extract/code_extraction.h"
#include "verifier_worker/funnel/candidate_session.h"
#include "verifier_worker/funnel/input_plan.h"
#include "verifier_worker/funnel/reference_set.h"
#include "verifier_worker/funnel/timing_stats.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using v1::HackFlag;
using v1::Stage;
using v1::StageOutcome;
using v1::StageResult;

std::string HexHash(const std::string& text) {
  return absl::StrFormat("%016x", std::hash<std::string>{}(text));
}

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

// One verification: the request, what has been learned so far, and the
// verdict being written.
class Funnel::Run {
 public:
  Run(Funnel& funnel, const v1::VerifyRequest& request)
      : f_(funnel), request_(request), options_(request.options()),
        limits_(options_.limits()), started_(absl::Now()) {}

  v1::Verdict Execute();

 private:
  StageResult* Begin(Stage stage) {
    StageResult* result = verdict_.add_stages();
    result->set_stage(stage);
    stage_start_ = absl::Now();
    verdict_.set_stage_reached(stage);
    return result;
  }
  bool End(StageResult* stage, StageOutcome outcome, const std::string& message = "") {
    stage->set_outcome(outcome);
    stage->set_message(message);
    stage->set_seconds(absl::ToDoubleSeconds(absl::Now() - stage_start_));
    return outcome == v1::OUTCOME_PASSED;
  }
  void Flag(HackFlag flag, const std::string& detail) {
    verdict_.add_hack_flags(flag);
    verdict_.add_hack_details(detail);
  }
  // A request to the candidate that did not come back (sandbox_ is set).
  bool EndWithSessionError(StageResult* stage, const absl::Status& status);
  // A reply of type "failed" (the candidate raised, or a harness check).
  bool EndWithFailedReply(StageResult* stage, const Frame& reply, const std::string& context);

  bool Static();
  bool PrepareReference();
  bool CompileAndTinyRun();
  bool MultiInput();
  void Timing();
  // False (stage ended) when timing could not complete.
  bool TimeBlocks(StageResult* stage, std::vector<std::string>& pool);
  v1::Verdict Finish();

  Funnel& f_;
  const v1::VerifyRequest& request_;
  const v1::VerifierOptions& options_;
  const v1::SandboxLimits& limits_;
  const absl::Time started_;
  absl::Time stage_start_;
  absl::BitGen rng_;
  v1::Verdict verdict_;
  std::string code_;
  std::string cache_key_;
  std::vector<std::string> launched_kernels_;
  InputPlan plan_;
  uint64_t init_seed_ = 0;
  Frame prepared_;
  std::map<std::string, ReferenceSet> sets_;
  std::unique_ptr<CandidateSandbox> sandbox_;  // from the compile stage on
  bool internal_error_ = false;
};

bool Funnel::Run::EndWithSessionError(StageResult* stage, const absl::Status& status) {
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

bool Funnel::Run::EndWithFailedReply(StageResult* stage, const Frame& reply,
                                     const std::string& context) {
  const std::string flag = reply.GetString("flag");
  const std::string message = absl::StrCat(context, reply.GetString("message"));
  HackFlag parsed;
  if (!flag.empty() && v1::HackFlag_Parse(flag, &parsed)) Flag(parsed, message);
  return End(stage, v1::OUTCOME_FAILED, message);
}

bool Funnel::Run::Static() {
  StageResult* stage = Begin(v1::STAGE_STATIC);
  absl::StatusOr<ExtractedCode> extracted = ExtractCandidateCode(request_.completion());
  if (!extracted.ok()) return End(stage, v1::OUTCOME_FAILED, std::string(extracted.status().message()));
  code_ = extracted->code;
  verdict_.set_extracted_code(code_);
  auto static_check = [&]() -> absl::StatusOr<Frame> {
    KF_ASSIGN_OR_RETURN(std::shared_ptr<ZygoteClient> zygote, f_.Zygote());
    return zygote->StaticCheck(code_, options_.require_triton(), limits_.max_source_bytes(),
                               absl::Seconds(30));
  };
  absl::StatusOr<Frame> result = static_check();
  // A zygote that died under this request (UNAVAILABLE) is replaced by the
  // next Zygote() call: one more try, so the candidate is not failed for it.
  if (absl::IsUnavailable(result.status())) result = static_check();
  if (!result.ok()) {
    internal_error_ = true;
    return End(stage, v1::OUTCOME_INTERNAL_ERROR, std::string(result.status().message()));
  }
  std::vector<std::string> messages;
  if (const auto* findings = result->Get("findings")) {
    for (const auto& finding : findings->list_value().values()) {
      const auto& fields = finding.struct_value().fields();
      const std::string message = fields.at("message").string_value();
      messages.push_back(message);
      HackFlag flag;
      if (v1::HackFlag_Parse(fields.at("flag").string_value(), &flag)) Flag(flag, message);
    }
  }
  if (const auto* kernels = result->Get("launched_kernels")) {
    for (const auto& k : kernels->list_value().values()) launched_kernels_.push_back(k.string_value());
  }
  cache_key_ = absl::StrCat(result->GetString("normalized_sha256"), ":",
                            HexHash(request_.task().reference_source()), ":",
                            HexHash(options_.SerializeAsString()), ":", f_.device_name_);
  if (!result->GetBool("ok")) return End(stage, v1::OUTCOME_FAILED, absl::StrJoin(messages, "\n"));
  return End(stage, v1::OUTCOME_PASSED);
}

bool Funnel::Run::PrepareReference() {
  const bool cuda = f_.config_.harness.device.rfind("cuda", 0) == 0;
  plan_ = BuildInputPlan(options_.multi_input(), cuda ? "bfloat16" : "", rng_);
  init_seed_ = absl::Uniform<uint64_t>(rng_, 1, uint64_t{1} << 31);
  Frame request = Frame::Of("prepare");
  request.Set("task_key", HexHash(request_.task().reference_source()))
      .Set("source", request_.task().reference_source())
      .Set("device", f_.config_.harness.device)
      .Set("init_seed", static_cast<int64_t>(init_seed_))
      .Set("max_set_bytes", options_.multi_input().max_set_bytes());
  google::protobuf::Value sets;
  std::vector<InputSetSpec> all = {plan_.tiny};
  all.insert(all.end(), plan_.sets.begin(), plan_.sets.end());
  for (const InputSetSpec& spec : all) *sets.mutable_list_value()->add_values() = spec.ToValue();
  request.Set("sets", std::move(sets));
  absl::StatusOr<Frame> prepared =
      f_.reference_.Call(request, absl::Seconds(limits_.correctness_timeout_s()));
  absl::StatusOr<std::map<std::string, ReferenceSet>> parsed =
      prepared.ok() ? ParsePrepared(*prepared, all)
                    : absl::StatusOr<std::map<std::string, ReferenceSet>>(prepared.status());
  if (!parsed.ok() || !(*parsed)["task_inputs"].ok) {
    internal_error_ = true;
    StageResult* stage = Begin(v1::STAGE_COMPILE);
    End(stage, v1::OUTCOME_INTERNAL_ERROR,
        absl::StrCat("the task's reference could not run: ",
                     parsed.ok() ? (*parsed)["task_inputs"].message
                                 : std::string(parsed.status().message())));
    return false;
  }
  prepared_ = *std::move(prepared);
  sets_ = *std::move(parsed);
  return true;
}

bool Funnel::Run::CompileAndTinyRun() {
  StageResult* stage = Begin(v1::STAGE_COMPILE);
  absl::StatusOr<std::unique_ptr<CandidateSandbox>> sandbox = f_.sandboxes_->Take(limits_);
  if (!sandbox.ok()) {
    internal_error_ = true;
    return End(stage, v1::OUTCOME_INTERNAL_ERROR, std::string(sandbox.status().message()));
  }
  sandbox_ = *std::move(sandbox);
  if (f_.metrics_ != nullptr) f_.metrics_->RecordSandbox(sandbox_->was_spare);
  const absl::Duration timeout = absl::Seconds(limits_.correctness_timeout_s());
  // Tiny inputs if the reference supports them, else the task's own.
  const ReferenceSet& tiny = sets_["tiny"].ok ? sets_["tiny"] : sets_["task_inputs"];
  uint64_t output_bytes = 0;
  for (const TensorEntry& e : tiny.outputs) output_bytes += e.nbytes;
  Frame compile = Frame::Of("compile");
  compile.Set("poison_bytes", static_cast<int64_t>(output_bytes));
  compile.Set("source", code_)
      .Set("init_inputs", tiny.init_inputs)
      .Set("init_seed", static_cast<int64_t>(init_seed_))
      .Set("set", tiny.spec.name)
      .Set("dtype", tiny.spec.dtype);
  AttachInputs(tiny, prepared_, compile);
  absl::StatusOr<Frame> reply = sandbox_->session->Request(compile, timeout);
  if (!reply.ok()) return EndWithSessionError(stage, reply.status());
  if (reply->type() == "failed") return EndWithFailedReply(stage, *reply, "");
  End(stage, v1::OUTCOME_PASSED);
  if (options_.last_stage() < v1::STAGE_TINY_RUN) return false;

  stage = Begin(v1::STAGE_TINY_RUN);
  const SetCheck check = CheckCandidateOutputs(tiny, prepared_, *reply, 1, options_.tolerances());
  for (const auto& [flag, detail] : check.flags) Flag(flag, detail);
  *verdict_.add_input_sets() = check.result;
  if (!check.result.passed()) {
    return End(stage, v1::OUTCOME_FAILED,
               absl::StrCat(tiny.spec.name, " inputs: ", check.result.message()));
  }
  return End(stage, v1::OUTCOME_PASSED);
}

bool Funnel::Run::MultiInput() {
  StageResult* stage = Begin(v1::STAGE_MULTI_INPUT);
  const absl::Duration timeout = absl::Seconds(limits_.correctness_timeout_s());
  const int repeat = options_.check_self_consistency() ? 2 : 1;
  int usable = 0, passed = 0;
  bool task_inputs_passed = false;
  for (const InputSetSpec& spec : plan_.sets) {
    const ReferenceSet& set = sets_[spec.name];
    if (!set.ok) continue;  // the reference itself cannot run it
    ++usable;
    uint64_t output_bytes = 0;
    for (const TensorEntry& e : set.outputs) output_bytes += e.nbytes;
    Frame run = Frame::Of("run");
    run.Set("set", spec.name).Set("init_inputs", set.init_inputs).Set("repeat", repeat)
        .Set("dtype", spec.dtype);
    run.Set("poison_bytes", static_cast<int64_t>(output_bytes));
    AttachInputs(set, prepared_, run);
    absl::StatusOr<Frame> reply = sandbox_->session->Request(run, timeout);
    if (!reply.ok()) return EndWithSessionError(stage, reply.status());
    if (reply->type() == "failed") {
      return EndWithFailedReply(stage, *reply, absl::StrCat(spec.name, " inputs: "));
    }
    const SetCheck check =
        CheckCandidateOutputs(set, prepared_, *reply, repeat, options_.tolerances());
    for (const auto& [flag, detail] : check.flags) Flag(flag, detail);
    *verdict_.add_input_sets() = check.result;
    if (!check.result.passed()) {
      if (task_inputs_passed && !spec.same_shape) {
        Flag(v1::HACK_EXACT_SHAPE_ONLY,
             absl::StrCat("right on the task's own shapes, wrong on ", spec.name));
      }
      return End(stage, v1::OUTCOME_FAILED,
                 absl::StrCat(spec.name, " inputs: ", check.result.message()));
    }
    ++passed;
    if (spec.name == "task_inputs") task_inputs_passed = true;
  }
  const int needed = std::min(options_.multi_input().min_input_sets(), usable);
  if (passed < needed) {
    return End(stage, v1::OUTCOME_FAILED,
               absl::StrCat(passed, " input sets passed; ", needed, " are required"));
  }
  return End(stage, v1::OUTCOME_PASSED);
}

bool Funnel::Run::TimeBlocks(StageResult* stage, std::vector<std::string>& pool) {
  const v1::TimingProtocol& protocol = options_.timing();
  const bool cuda = f_.config_.harness.device.rfind("cuda", 0) == 0;
  const absl::Duration timeout = absl::Seconds(limits_.timing_timeout_s());
  google::protobuf::Value pool_value;
  for (const std::string& name : pool) pool_value.mutable_list_value()->add_values()->set_string_value(name);
  std::vector<double> cand_dev, cand_host, eager_dev, eager_host, comp_dev, comp_host;
  // torch.compile is a GPU baseline: on the CPU, Inductor's first C++ build
  // of a task takes minutes, longer than a timing budget, and CPU runs are
  // for tests and the local demo, where the eager baseline is enough.
  bool compile_available = protocol.baseline_compile() && f_.has_compile_ && cuda;
  auto append = [&](const Frame& reply, std::vector<double>& dev, std::vector<double>& host) {
    for (const char* key : {"event_ms", "host_ms"}) {
      const google::protobuf::Value* list = reply.Get(key);
      if (list == nullptr) continue;
      auto& out = std::string(key) == "event_ms" ? dev : host;
      for (const auto& v : list->list_value().values()) out.push_back(v.number_value());
    }
    if (!cuda) dev = host;  // no events on the CPU: the host clock is the measure
  };
  const std::string task_key = HexHash(request_.task().reference_source());
  // The first block times `interleave_block` trials of each side; each later
  // one as many as that side still needs for min_timed_ms, estimated from
  // every trial so far (LaterBlockTrials), spread over the planned blocks.
  // A first estimate that was off (a loaded host) is corrected by the next
  // blocks, which go on until every side has its trials.
  const int block = std::min(protocol.interleave_block(), protocol.trials());
  const int blocks = std::max(2, (protocol.trials() + block - 1) / block);
  int eager_n = block, comp_n = block, cand_n = block;
  int cand_done = 0;
  size_t timed_before = 0;  // trials of every side before the last block
  for (int b = 0;; ++b) {
    const size_t timed = eager_dev.size() + comp_dev.size() + cand_dev.size();
    if (b > 0 && timed == timed_before) break;  // a block that added nothing ends it
    timed_before = timed;
    if (b > 0) {
      const int left = std::max(1, blocks - b);
      auto more = [&](const std::vector<double>& times) {
        return LaterBlockTrials(times, left, protocol);
      };
      eager_n = protocol.baseline_eager() ? more(eager_dev) : 0;
      comp_n = compile_available ? more(comp_dev) : 0;
      cand_n = more(cand_dev);
      if (eager_n == 0 && comp_n == 0 && cand_n == 0) break;
    }
    const int warmup = b == 0 ? protocol.warmup_trials() : 0;
    // Baselines and candidate alternate block by block, so drift hits both.
    for (const char* mode : {"eager", "compile"}) {
      if (std::string(mode) == "eager" ? !protocol.baseline_eager() : !compile_available) continue;
      const int n = std::string(mode) == "eager" ? eager_n : comp_n;
      if (n <= 0) continue;
      Frame request = Frame::Of("time");
      request.Set("task_key", task_key).Set("sets", pool_value).Set("mode", mode)
          .Set("trials", n).Set("warmup", warmup).Set("flush_l2", protocol.flush_l2())
          .Set("device", f_.config_.harness.device);
      absl::StatusOr<Frame> reply = f_.reference_.Call(request, timeout);
      if (!reply.ok()) {
        internal_error_ = true;
        return End(stage, v1::OUTCOME_INTERNAL_ERROR,
                   absl::StrCat("timing the ", mode, " baseline: ", reply.status().message()));
      }
      if (!reply->GetString("unavailable").empty()) {
        compile_available = false;
        continue;
      }
      std::string(mode) == "eager" ? append(*reply, eager_dev, eager_host)
                                   : append(*reply, comp_dev, comp_host);
    }
    if (cand_n <= 0) continue;
    Frame request = Frame::Of("time");
    request.Set("sets", pool_value).Set("trials", cand_n).Set("warmup", warmup)
        .Set("flush_l2", protocol.flush_l2()).Set("start", cand_done)
        .Set("init_inputs", sets_[pool.front()].init_inputs).Set("dtype", "");
    cand_done += cand_n;
    absl::StatusOr<Frame> reply = sandbox_->session->Request(request, timeout);
    if (!reply.ok()) return EndWithSessionError(stage, reply.status());
    if (reply->type() == "failed") return EndWithFailedReply(stage, *reply, "timed run: ");
    append(*reply, cand_dev, cand_host);
    // Timed runs are checked too: a candidate must not answer differently
    // when it is being timed.
    const SetCheck recheck = CheckOutputsOnly(sets_[reply->GetString("last_set")], prepared_,
                                              *reply, "last/out", options_.tolerances());
    if (!recheck.result.passed()) {
      Flag(v1::HACK_NONDETERMINISTIC,
           absl::StrCat("timed run on ", recheck.result.name(), ": ", recheck.result.message()));
      return End(stage, v1::OUTCOME_FAILED,
                 absl::StrCat("a timed run's output is wrong: ", recheck.result.message()));
    }
  }
  *verdict_.mutable_candidate_timing() = SummarizeTiming(cand_dev, cand_host, protocol);
  if (!eager_dev.empty()) *verdict_.mutable_eager_timing() = SummarizeTiming(eager_dev, eager_host, protocol);
  if (!comp_dev.empty()) *verdict_.mutable_compile_timing() = SummarizeTiming(comp_dev, comp_host, protocol);
  return true;
}

void Funnel::Run::Timing() {
  StageResult* stage = Begin(v1::STAGE_TIMING);
  const v1::TimingProtocol& protocol = options_.timing();
  std::vector<std::string> pool;
  for (const InputSetSpec& spec : plan_.sets) {
    if (spec.same_shape && sets_[spec.name].ok &&
        static_cast<int>(pool.size()) < protocol.input_pool()) {
      pool.push_back(spec.name);
    }
  }
  if (!TimeBlocks(stage, pool)) return;
  const double cand = Representative(verdict_.candidate_timing(), protocol);
  auto speedup = [&](const v1::Timing& base) {
    return cand > 0 && base.trials() > 0 ? Representative(base, protocol) / cand : 0.0;
  };
  verdict_.set_speedup_vs_eager(speedup(verdict_.eager_timing()));
  verdict_.set_speedup_vs_compile(speedup(verdict_.compile_timing()));
  std::vector<std::string> problems;
  const bool cuda = f_.config_.harness.device.rfind("cuda", 0) == 0;
  if (cuda) {
    // Work hidden on another stream or thread: events see little, the host
    // clock (around a device-wide synchronise) sees it all.
    const v1::Timing& c = verdict_.candidate_timing();
    const v1::Timing& e = verdict_.eager_timing();
    const double gap = c.host_mean_ms() - c.mean_ms();
    const double baseline_gap = e.trials() > 0 ? e.host_mean_ms() - e.mean_ms() : 0.0;
    if (gap > (protocol.host_event_ratio_flag() - 1) * std::max(c.mean_ms(), 0.01) &&
        gap > baseline_gap + 0.05) {
      problems.push_back(absl::StrFormat("host time %.4f ms is far above event time %.4f ms",
                                         c.host_mean_ms(), c.mean_ms()));
      Flag(v1::HACK_SIDE_STREAM, problems.back());
    }
    if (options_.require_triton()) {
      Frame profile = Frame::Of("profile");
      profile.Set("set", pool.front());
      google::protobuf::Value kernels;
      for (const std::string& k : launched_kernels_) kernels.mutable_list_value()->add_values()->set_string_value(k);
      profile.Set("kernels", kernels);
      absl::StatusOr<Frame> reply =
          sandbox_->session->Request(profile, absl::Seconds(limits_.timing_timeout_s()));
      if (reply.ok() && reply->type() == "profiled") {
        const double total = reply->GetNumber("total_us"), own = reply->GetNumber("own_us");
        if (total <= 0 || own < 0.5 * total) {
          problems.push_back(absl::StrFormat(
              "the candidate's own Triton kernels took %.0f%% of its GPU time",
              total > 0 ? 100 * own / total : 0.0));
          Flag(v1::HACK_KERNELS_NOT_RUN, problems.back());
        }
      }
    }
  }
  if (verdict_.speedup_vs_eager() > protocol.max_plausible_speedup()) {
    problems.push_back(absl::StrFormat("speedup %.1fx is above the plausible bound %.0fx",
                                       verdict_.speedup_vs_eager(),
                                       protocol.max_plausible_speedup()));
    Flag(v1::HACK_SPEEDUP_IMPLAUSIBLE, problems.back());
  }
  End(stage, problems.empty() ? v1::OUTCOME_PASSED : v1::OUTCOME_FAILED,
      absl::StrJoin(problems, "; "));
}

v1::Verdict Funnel::Run::Execute() {
  const bool ran_static = Static();
  if (ran_static) {
    if (std::optional<v1::Verdict> cached = f_.cache_.Get(cache_key_)) {
      if (f_.metrics_ != nullptr) f_.metrics_->RecordCacheLookup(true);
      cached->set_cached(true);
      return *cached;
    }
    if (f_.metrics_ != nullptr) f_.metrics_->RecordCacheLookup(false);
  }
  if (ran_static && options_.last_stage() >= v1::STAGE_COMPILE && PrepareReference()) {
    bool correct = false;
    {
      SlotGuard slot(f_.slots_mu_, f_.slot_freed_, f_.free_slots_);
      absl::ReaderMutexLock shared(&f_.device_mu_);
      correct = CompileAndTinyRun() && options_.last_stage() >= v1::STAGE_MULTI_INPUT &&
                MultiInput();
    }
    verdict_.set_correct(correct);
    if (correct && options_.timing().enabled() && options_.last_stage() >= v1::STAGE_TIMING) {
      absl::WriterMutexLock exclusive(&f_.device_mu_);
      Timing();
    }
  }
  return Finish();
}

v1::Verdict Funnel::Run::Finish() {
  sandbox_.reset();
  verdict_.set_device(f_.device_name_);
  verdict_.set_total_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  if (!internal_error_ && !cache_key_.empty() && options_.use_cache()) {
    f_.cache_.Put(cache_key_, verdict_);
  }
  return verdict_;
}

Funnel::Funnel(FunnelConfig config, VerifierMetrics* metrics)
    : config_(std::move(config)), metrics_(metrics), reference_(config_.harness),
      cache_(config_.cache_entries), free_slots_(config_.max_concurrent) {}

Funnel::~Funnel() = default;

absl::StatusOr<std::unique_ptr<CandidateSandbox>> Funnel::MakeSandbox(
    const v1::SandboxLimits& limits, bool spare) {
  auto sandbox = std::make_unique<CandidateSandbox>();
  sandbox->work_dir = (fs::path(config_.work_dir) /
                       absl::StrCat("c", next_candidate_.fetch_add(1), "-", ::getpid()))
                          .string();
  std::error_code ec;
  fs::create_directories(sandbox->work_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(sandbox->work_dir, ": ", ec.message()));
  fs::permissions(sandbox->work_dir, fs::perms::owner_all, ec);
  if (cgroups_ != nullptr) {
    KF_ASSIGN_OR_RETURN(sandbox->cgroup,
                        cgroups_->Create(fs::path(sandbox->work_dir).filename().string(),
                                         limits.memory_bytes(), limits.max_processes()));
  }
  Frame config;  // a Struct builder
  config.Set("work_dir", sandbox->work_dir)
      .Set("device", config_.harness.device)
      .Set("max_open_files", static_cast<int>(limits.max_open_files()))
      .Set("max_file_bytes", limits.max_file_bytes())
      .Set("max_processes", static_cast<int>(limits.max_processes()))
      .Set("memory_bytes", limits.memory_bytes())
      .Set("threads", config_.candidate_threads)
      .Set("warm_up", spare)
      // The child copies it into its own cache before it is confined.
      .Set("triton_base_cache", triton_base_cache_);
  if (sandbox->cgroup != nullptr) {
    google::protobuf::Value cgroups;
    for (const auto& [controller, procs_file] : sandbox->cgroup->procs_files()) {
      (*cgroups.mutable_struct_value()->mutable_fields())[controller].set_string_value(procs_file);
    }
    config.Set("cgroups", std::move(cgroups));
  }
  KF_ASSIGN_OR_RETURN(std::shared_ptr<ZygoteClient> zygote, Zygote());
  const absl::Duration timeout = absl::Seconds(limits.correctness_timeout_s());
  // A spare's warm-up uses the GPU: not while a candidate is being timed.
  // (A sandbox made on demand is made under the caller's shared hold.)
  std::optional<absl::ReaderMutexLock> shared;
  if (spare) shared.emplace(&device_mu_);
  KF_ASSIGN_OR_RETURN(sandbox->session, CandidateSession::Start(zygote, config.header, timeout));
  return sandbox;
}

void Funnel::FillTritonBaseCache() {
  if (config_.harness.device.rfind("cuda", 0) != 0) {
    triton_cache_report_ = "none (not on a GPU)";
    return;
  }
  absl::StatusOr<std::shared_ptr<ZygoteClient>> zygote = Zygote();
  if (!zygote.ok() || (*zygote)->hello().GetString("triton").empty()) {
    triton_cache_report_ = "none (no Triton)";
    return;
  }
  const std::string dir = (fs::path(config_.work_dir) / "triton-base-cache").string();
  std::error_code ec;
  fs::remove_all(dir, ec);
  absl::StatusOr<Frame> filled = (*zygote)->FillTritonCache(dir, config_.harness.device,
                                                            config_.start_timeout);
  if (!filled.ok()) {
    // Candidates then build Triton's launchers themselves: slower, not wrong.
    triton_cache_report_ = absl::StrCat("none (", filled.status().message(), ")");
    return;
  }
  triton_base_cache_ = dir;
  triton_cache_report_ = dir;
}

absl::StatusOr<std::unique_ptr<Funnel>> Funnel::Create(FunnelConfig config,
                                                       VerifierMetrics* metrics) {
  std::error_code ec;
  fs::create_directories(config.work_dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(config.work_dir, ": ", ec.message()));
  std::unique_ptr<Funnel> funnel(new Funnel(std::move(config), metrics));
  KF_RETURN_IF_ERROR(funnel->SetUpCgroups());
  KF_RETURN_IF_ERROR(funnel->Zygote().status());
  Frame info_request = Frame::Of("device_info");
  info_request.Set("device", funnel->config_.harness.device);
  KF_ASSIGN_OR_RETURN(Frame info, funnel->reference_.Call(info_request, funnel->config_.start_timeout));
  funnel->device_name_ = info.GetString("device");
  funnel->has_compile_ = info.GetBool("compile");
  funnel->FillTritonBaseCache();
  v1::SandboxLimits limits;
  KF_RETURN_IF_ERROR(ApplyProtoDefaults(&limits));
  Funnel* self = funnel.get();
  funnel->sandboxes_ = std::make_unique<SandboxPool>(
      SandboxPool::Options{.spares = funnel->config_.spare_sandboxes,
                           .make = [self](const v1::SandboxLimits& l, bool spare) {
                             return self->MakeSandbox(l, spare);
                           }},
      limits);
  return funnel;
}

absl::StatusOr<CgroupMode> ParseCgroupMode(absl::string_view name) {
  if (name == "auto") return CgroupMode::kAuto;
  if (name == "required") return CgroupMode::kRequired;
  if (name == "off") return CgroupMode::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("cgroups: \"", name, "\" is not one of \"auto\", \"required\", \"off\""));
}

absl::Status Funnel::SetUpCgroups() {
  if (config_.cgroups == CgroupMode::kOff) {
    cgroup_report_ = "off by configuration: memory bounded by RLIMIT_DATA";
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<CgroupRoot>> root =
      // Unique per funnel: a process may hold several (the benchmark does),
      // and each removes its own subtree when it goes.
      CgroupRoot::Discover(absl::StrFormat("kforge-verifier-%d-%08x", ::getpid(),
                                           absl::Uniform<uint32_t>(absl::BitGen())));
  if (!root.ok()) {
    if (config_.cgroups == CgroupMode::kRequired) {
      return absl::FailedPreconditionError(absl::StrCat(
          "per-candidate cgroups are required (cgroups: \"required\") but unusable: ",
          root.status().message()));
    }
    cgroup_report_ = absl::StrCat("unusable (", root.status().message(),
                                  "): memory bounded by RLIMIT_DATA, processes by RLIMIT_NPROC "
                                  "where not root");
    return absl::OkStatus();
  }
  cgroups_ = *std::move(root);
  cgroup_report_ = cgroups_->Describe();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ZygoteClient>> Funnel::Zygote() {
  absl::MutexLock lock(&zygote_mu_);
  if (zygote_ == nullptr || !zygote_->alive()) {
    zygote_.reset();
    KF_ASSIGN_OR_RETURN(zygote_, ZygoteClient::Start(config_.harness, config_.start_timeout));
  }
  if (metrics_ != nullptr) metrics_->zygote_up.Set(1);
  return zygote_;
}

bool Funnel::healthy() const {
  absl::MutexLock lock(&zygote_mu_);
  return zygote_ != nullptr && zygote_->alive();
}

v1::Verdict Funnel::Verify(const v1::VerifyRequest& request) {
  if (metrics_ != nullptr) metrics_->in_flight.Increment();
  v1::Verdict verdict = Run(*this, request).Execute();
  if (metrics_ != nullptr) {
    metrics_->in_flight.Decrement();
    metrics_->spare_sandboxes.Set(sandboxes_->ready());
    metrics_->RecordVerdict(verdict);
  }
  return verdict;
}

}  // namespace kforge
