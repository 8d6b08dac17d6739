// Stage 5 in two halves. Measured with the device to itself: the
// baselines' times (from the baseline cache after a short drift re-check,
// or measured now), the candidate's time by budget (timing.Budget: warm-up
// by time, trials until the mean is known to target_rel_stderr or the cap)
// with the fresh-input calls at secret positions among the trials, and on a
// GPU one more recorded run (what forward launches after its timed runs).
// Judged after the device is free again: the last timed output, every
// secretly recorded call's and every fresh call's checked against the
// reference, the launches attributed, the flags. Every timed call gets
// fresh clones of its inputs and runs after an L2 flush.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "verifier_worker/funnel/baseline_cache.h"
#include "verifier_worker/funnel/timed_reply.h"
#include "verifier_worker/funnel/timing_stats.h"
#include "verifier_worker/funnel/verification.h"

namespace kforge {
namespace {

void AppendTimes(const Frame& reply, bool cuda, std::vector<double>& device,
                 std::vector<double>& host) {
  for (const char* key : {"event_ms", "host_ms"}) {
    const google::protobuf::Value* list = reply.Get(key);
    if (list == nullptr) continue;
    std::vector<double>& out = std::string(key) == "event_ms" ? device : host;
    for (const auto& v : list->list_value().values()) out.push_back(v.number_value());
  }
  if (!cuda) device = host;  // no events on the CPU: the host clock is the measure
}

}  // namespace

bool Funnel::Run::EndWithImpossibleTime(v1::StageResult* stage, const Frame& reply,
                                        const std::string& context) {
  const std::string impossible = ImpossibleTime(reply);
  if (impossible.empty()) return false;
  const std::string message = absl::StrCat(context, impossible);
  Flag(v1::HACK_RESULT_FORGERY, message);
  verdict_.set_correct(false);
  End(stage, v1::OUTCOME_FAILED, message);
  return true;
}

Frame Funnel::Run::BudgetFrame(const std::string& type, int min_trials, double min_ms,
                               double max_ms, bool warm_up) const {
  const v1::TimingProtocol& p = options_.timing();
  Frame frame = Frame::Of(type);
  frame.Set("sets", StringList(pool_))
      .Set("flush_l2", p.flush_l2())
      .Set("clone_inputs", p.clone_inputs())
      .Set("min_trials", min_trials)
      .Set("max_trials", p.max_trials())
      .Set("min_ms", min_ms)
      .Set("max_ms", std::max(min_ms, max_ms))
      .Set("target_rel_stderr", p.target_rel_stderr())
      // The stop rule judges the statistic the verdict reports.
      .Set("trim_fraction",
           p.statistic() == v1::TIMING_TRIMMED_MEAN ? p.trim_fraction() : 0.0)
      .Set("warmup", warm_up ? p.warmup_trials() : 0)
      .Set("warmup_ms", warm_up ? p.warmup_ms() : 0.0)
      .Set("launch_cover_ms", p.launch_cover_ms());
  return frame;
}

std::string Funnel::Run::BaselineKey() const {
  const v1::TimingProtocol& p = options_.timing();
  // The protocol is part of the key: times measured under another budget
  // or statistic are another measurement.
  std::string key = absl::StrCat(HexHash(request_.task().reference_source()), "|",
                                 f_.device_name_, "|", f_.library_versions_, "|",
                                 HexHash(p.SerializeAsString()));
  for (const std::string& name : pool_) {
    const ReferenceSet& set = SetNamed(name);
    absl::StrAppend(&key, "|", set.init_inputs.DebugString());
    for (const TensorEntry& e : set.inputs) {
      absl::StrAppend(&key, ";", e.dtype, "[", absl::StrJoin(e.shape, ","), "]");
    }
  }
  return key;
}

void Funnel::Run::AddBaselineFields(const std::string& mode, Frame& request) const {
  request.Set("task_key", HexHash(request_.task().reference_source()))
      .Set("source", request_.task().reference_source())
      .Set("init_seed", static_cast<int64_t>(epoch_->init_seed))
      .Set("max_set_bytes", options_.multi_input().max_set_bytes())
      .Set("mode", mode)
      .Set("device", f_.config_.harness.device)
      .Set("sets", StringList(pool_));
  // The specs let the reference server rebuild sets it has dropped since.
  google::protobuf::Value specs;
  for (const std::string& name : pool_) {
    *specs.mutable_list_value()->add_values() = SetNamed(name).spec.ToValue();
  }
  request.Set("specs", std::move(specs));
}

absl::StatusOr<v1::Timing> Funnel::Run::TimeBaseline(const std::string& mode, int min_trials,
                                                     double min_ms, double max_ms,
                                                     bool* unavailable) {
  Frame request = BudgetFrame("time", min_trials, min_ms, max_ms, /*warm_up=*/true);
  AddBaselineFields(mode, request);
  // Only the timing stage times baselines, and it holds the task's server
  // (Execute took it before the GPU).
  absl::StatusOr<Frame> reply =
      reference_held_->Call(request, absl::Seconds(limits_.timing_timeout_s()));
  if (!reply.ok()) return reply.status();
  *unavailable = !reply->GetString("unavailable").empty();
  std::vector<double> device, host;
  AppendTimes(*reply, cuda(), device, host);
  return SummarizeTiming(device, host, options_.timing());
}

bool Funnel::Run::CompileBaseline() const {
  const v1::TimingProtocol& p = options_.timing();
  // torch.compile is a GPU baseline: on the CPU, Inductor's first C++ build
  // of a task takes minutes, longer than a timing budget, and CPU runs are
  // for tests and the local demo, where the eager baseline is enough.
  return p.baseline_compile() && f_.has_compile_ && cuda();
}

void Funnel::Run::ChooseTimingPool() {
  pool_.clear();
  for (const InputSetSpec& spec : epoch_->plan.sets) {
    if (spec.same_shape && spec.max_bytes == 0 && SetNamed(spec.name).ok &&
        static_cast<int>(pool_.size()) < options_.timing().input_pool()) {
      pool_.push_back(spec.name);
    }
  }
}

void Funnel::Run::WarmBaselines() {
  const v1::TimingProtocol& p = options_.timing();
  ChooseTimingPool();
  if (pool_.empty() ||
      (p.cache_baselines() &&
       f_.baselines_.Get(BaselineKey(), absl::Seconds(p.baseline_max_age_s())).has_value())) {
    return;
  }
  for (const char* mode : {"eager", "compile"}) {
    if (std::string(mode) == "eager" ? !p.baseline_eager() : !CompileBaseline()) continue;
    Frame request = Frame::Of("warm");
    AddBaselineFields(mode, request);
    // A failure here shows again, with its message, when the baseline is
    // timed: nothing to report twice.
    (void)f_.reference_.For(HexHash(request_.task().reference_source()))
        .Call(request, absl::Seconds(limits_.timing_timeout_s()));
  }
}

bool Funnel::Run::Baselines(v1::StageResult* stage) {
  const v1::TimingProtocol& p = options_.timing();
  const std::string key = BaselineKey();
  std::optional<BaselineTimes> cached;
  if (p.cache_baselines()) cached = f_.baselines_.Get(key, absl::Seconds(p.baseline_max_age_s()));
  std::string lookup = cached ? "hit" : "miss";
  bool unavailable = false;
  if (cached && cached->eager.trials() > 0 && p.drift_check_ms() > 0) {
    // A short run: a few trials for drift_check_ms, not the full budget.
    absl::StatusOr<v1::Timing> recheck =
        TimeBaseline("eager", std::min(p.drift_check_trials(), p.trials()), p.drift_check_ms(),
                     2 * p.drift_check_ms(), &unavailable);
    if (!recheck.ok()) {
      internal_error_ = true;
      return End(stage, v1::OUTCOME_INTERNAL_ERROR,
                 absl::StrCat("re-checking the eager baseline: ", recheck.status().message()));
    }
    measured_.eager_now = *recheck;
    measured_.reference_busier = ReferenceBusierNow(cached->eager, *recheck);
    if (Drifted(cached->eager, *recheck, p)) {
      cached.reset();
      lookup = "drift";
    }
  }
  if (f_.metrics_ != nullptr) f_.metrics_->RecordBaselineLookup(lookup);
  if (cached) {
    *verdict_.mutable_eager_timing() = cached->eager;
    *verdict_.mutable_compile_timing() = cached->compile;
    verdict_.set_baselines_cached(true);
    return true;
  }
  BaselineTimes measured{.measured = absl::Now()};
  const bool compile = CompileBaseline();
  for (const char* mode : {"eager", "compile"}) {
    if (std::string(mode) == "eager" ? !p.baseline_eager() : !compile) continue;
    absl::StatusOr<v1::Timing> timed =
        TimeBaseline(mode, p.trials(), p.min_timed_ms(), p.max_timed_ms(), &unavailable);
    if (!timed.ok()) {
      internal_error_ = true;
      return End(stage, v1::OUTCOME_INTERNAL_ERROR,
                 absl::StrCat("timing the ", mode, " baseline: ", timed.status().message()));
    }
    if (unavailable) continue;
    *(std::string(mode) == "eager" ? &measured.eager : &measured.compile) = *timed;
  }
  f_.baselines_.Put(key, measured);
  *verdict_.mutable_eager_timing() = measured.eager;
  *verdict_.mutable_compile_timing() = measured.compile;
  return true;
}

namespace {

// {dtype: [atol, rtol]} for the harness, the tolerances reference_set.cc
// compares floating outputs with (ToleranceFor).
google::protobuf::Value ToleranceTable(const v1::Tolerances& t) {
  google::protobuf::Value table;
  auto& fields = *table.mutable_struct_value()->mutable_fields();
  for (const char* dtype : {"float32", "float64", "float16", "bfloat16"}) {
    const Tolerance tol = ToleranceFor(dtype, t);
    google::protobuf::ListValue& pair = *fields[dtype].mutable_list_value();
    pair.add_values()->set_number_value(tol.atol);
    pair.add_values()->set_number_value(tol.rtol);
  }
  return table;
}

}  // namespace

bool Funnel::Run::RequestTimedRuns(v1::StageResult* stage) {
  const v1::TimingProtocol& p = options_.timing();
  Frame request =
      BudgetFrame("time", p.trials(), p.min_timed_ms(), p.max_timed_ms(), /*warm_up=*/true);
  request.Set("init_inputs", SetNamed(pool_.front()).init_inputs).Set("dtype", "").Set("start", 0);
  // Secret calls recorded instead of timed: drawn here, per candidate, among
  // the first `trials` calls (every run makes at least that many).
  google::protobuf::Value secret;
  if (attribution_.has_value()) {
    absl::BitGen rng;
    std::set<int> calls;  // distinct: always the same number recorded
    const int wanted = std::min(options_.recorded_timed_calls(), p.trials());
    while (static_cast<int>(calls.size()) < wanted) {
      calls.insert(absl::Uniform<int>(rng, 0, p.trials()));
    }
    for (int call : calls) secret.mutable_list_value()->add_values()->set_number_value(call);
  }
  const int recorded_calls = secret.list_value().values_size();
  // The fresh-input sets, each timed once at a call drawn in secret among
  // the first `trials` (none of them a recorded one), exactly as a trial:
  // a cache keyed on pointers or values misses there and shows its real
  // work, in the trials' own conditions (JudgeFreshCalls). Timed apart,
  // after the trials, on the CPU they came after a pause a cache could
  // time, and in a heap it could read (a red team's id(object()) cycle).
  measured_.fresh_sent.clear();
  measured_.fresh_calls.clear();
  google::protobuf::Value fresh_calls;
  uint64_t fresh_bytes = 0;
  {
    std::set<int> taken;
    for (const auto& v : secret.list_value().values()) {
      taken.insert(static_cast<int>(v.number_value()));
    }
    absl::BitGen rng;
    for (const std::string& name : FreshSets()) {
      if (static_cast<int>(taken.size()) >= p.trials()) break;
      measured_.fresh_sent.push_back(name);
      int call = absl::Uniform<int>(rng, 0, p.trials());
      while (taken.contains(call)) call = absl::Uniform<int>(rng, 0, p.trials());
      taken.insert(call);
      measured_.fresh_calls.push_back(call);
      auto& entry = *fresh_calls.mutable_list_value()->add_values()->mutable_struct_value();
      (*entry.mutable_fields())["call"].set_number_value(call);
      (*entry.mutable_fields())["set"].set_string_value(name);
      AttachInputs(SetNamed(name), epoch_->prepared, request);
      fresh_bytes += ReplyBytes(SetNamed(name), 1, /*with_inputs=*/false);
    }
    measured_.untimed_calls = std::move(taken);
  }
  request.Set("recorded_calls", std::move(secret));
  request.Set("fresh_calls", std::move(fresh_calls));
  // Each timed call's outputs must agree, within the stage-4 tolerances,
  // with the first call's on the same set (the harness compares them
  // outside the timed interval), and the last and the recorded ones are
  // compared with the reference here: so every timed call did the work, not
  // only the few a candidate cannot tell apart.
  request.Set("tolerances", ToleranceTable(options_.tolerances()));
  // The last timed output and each recorded call's: every set of the pool
  // has the task's own shapes.
  OfferReplyBuffer(request, ReplyBytes(SetNamed(pool_.front()), 1 + recorded_calls, false) +
                                fresh_bytes);
  // On the CPU, the process's CPU time over the request (every thread's:
  // work spread over threads no Python frame shows, as TorchScript's fork
  // onto torch's inter-op pool, costs CPU time all the same) and its wall
  // time, both by the verifier's clocks (JudgeCpuTime; the wall time a
  // monotonic clock's). Between requests the process is stopped, so the
  // first reading is where the request starts. On a GPU neither is judged.
  CandidateSession& session = *sandbox_->session;
  const bool on_cpu = !cuda();
  absl::StatusOr<absl::Duration> cpu_before = absl::ZeroDuration();
  if (on_cpu) cpu_before = session.CpuTime();
  const auto sent = std::chrono::steady_clock::now();
  absl::StatusOr<Frame> reply = session.Request(request, absl::Seconds(limits_.timing_timeout_s()));
  const std::chrono::duration<double, std::milli> wall = std::chrono::steady_clock::now() - sent;
  if (!reply.ok()) return EndWithSessionError(stage, reply.status());
  if (reply->type() == "failed") return EndWithFailedReply(stage, *reply, "timed run: ");
  if (EndWithImpossibleTime(stage, *reply, "timed run: ")) return false;
  if (on_cpu) {
    const absl::StatusOr<absl::Duration> cpu_after = session.CpuTime();
    if (!cpu_before.ok() || !cpu_after.ok()) {
      internal_error_ = true;
      return End(stage, v1::OUTCOME_INTERNAL_ERROR,
                 std::string((cpu_before.ok() ? cpu_after : cpu_before).status().message()));
    }
    measured_.cpu_ms = absl::ToDoubleMilliseconds(*cpu_after - *cpu_before);
    measured_.wall_ms = wall.count();
  }
  measured_.timed = *std::move(reply);
  return true;
}

bool Funnel::Run::JudgeTimedRuns(v1::StageResult* stage) {
  const Frame& reply = *measured_.timed;
  std::vector<double> device, host;
  AppendTimes(reply, cuda(), device, host);
  // Timed runs are checked too: a candidate must not answer differently
  // when it is being timed. The last one, and every secretly recorded one.
  std::vector<std::pair<std::string, std::string>> checks = {
      {reply.GetString("last_set"), "last/out"}};
  std::vector<const google::protobuf::Value*> records;
  if (const google::protobuf::Value* recorded = reply.Get("recorded")) {
    for (const auto& r : recorded->list_value().values()) {
      const auto& f = r.struct_value().fields();
      auto set = f.find("set");
      auto launches = f.find("launches");
      if (set == f.end() || launches == f.end()) continue;
      checks.emplace_back(set->second.string_value(), absl::StrCat("rec", records.size(), "/out"));
      records.push_back(&launches->second);
    }
  }
  for (const auto& [set, prefix] : checks) {
    const SetCheck recheck =
        CheckOutputsOnly(SetNamed(set), epoch_->prepared, reply, prefix, options_.tolerances());
    if (!recheck.result.passed()) {
      Flag(v1::HACK_NONDETERMINISTIC,
           absl::StrCat("timed run on ", recheck.result.name(), ": ", recheck.result.message()));
      verdict_.set_correct(false);
      return End(stage, v1::OUTCOME_FAILED,
                 absl::StrCat("a timed run's output is wrong: ", recheck.result.message()));
    }
  }
  for (const google::protobuf::Value* launches : records) {
    if (!Attribute(stage, launches, "a timed call")) {
      verdict_.set_correct(false);
      return false;
    }
  }
  *verdict_.mutable_candidate_timing() = SummarizeTiming(device, host, options_.timing());
  return true;
}

std::vector<std::string> Funnel::Run::FreshSets() const {
  std::vector<std::string> names;
  for (const InputSetSpec& spec : epoch_->plan.fresh) {
    if (SetNamed(spec.name).ok) names.push_back(spec.name);
  }
  return names;
}

bool Funnel::Run::JudgeFreshCalls(v1::StageResult* stage, std::vector<std::string>& problems) {
  const Frame& reply = *measured_.timed;
  const v1::TimingProtocol& p = options_.timing();
  const google::protobuf::Value* times = reply.Get("fresh_ms");
  const std::vector<std::string>& wanted = measured_.fresh_sent;
  if (const std::string detail = FreshCallsNotAsSent(reply, wanted.size(), !cuda());
      !detail.empty()) {
    Flag(v1::HACK_RESULT_FORGERY, detail);
    verdict_.set_correct(false);
    return End(stage, v1::OUTCOME_FAILED, detail);
  }
  for (const std::string& name : wanted) {
    const SetCheck check = CheckOutputsOnly(SetNamed(name), epoch_->prepared, reply,
                                            absl::StrCat(name, "/out"), options_.tolerances());
    if (!check.result.passed()) {
      const std::string detail = absl::StrCat(
          "right on every input set it had seen, wrong on a fresh one (", name,
          "): ", check.result.message());
      Flag(v1::HACK_RESULT_CACHING, detail);
      verdict_.set_correct(false);
      return End(stage, v1::OUTCOME_FAILED, detail);
    }
  }
  // On the CPU a fresh call's time is its wall time or, when the process
  // was off the CPU for part of it (a spare sandbox starting beside it
  // made an honest ReLU's two fresh calls 2.3x its median), the CPU time it
  // used, which is lower: the work it did on its own thread (more threads
  // are JudgeCpuTime's). A cache's miss costs its real work either way.
  const google::protobuf::Value* cpu_times = cuda() ? nullptr : reply.Get("fresh_cpu_ms");
  // The harness returns the fresh calls' times in the order they ran.
  std::vector<int> calls = measured_.fresh_calls;
  std::sort(calls.begin(), calls.end());
  std::vector<std::pair<int, double>> fresh;
  double fastest = 0;
  for (int i = 0; i < times->list_value().values_size(); ++i) {
    double ms = times->list_value().values(i).number_value();
    if (cpu_times != nullptr && i < cpu_times->list_value().values_size()) {
      ms = std::min(ms, cpu_times->list_value().values(i).number_value());
    }
    verdict_.add_fresh_input_ms(ms);
    if (i < static_cast<int>(calls.size())) fresh.emplace_back(calls[i], ms);
    fastest = fastest == 0 ? ms : std::min(fastest, ms);
  }
  measured_.fresh_fastest_ms = fastest;
  // The fresh calls ran among the trials, in their conditions (the same
  // clone, L2 flush and launch cover on a GPU; no pause on the CPU): an
  // honest kernel's fastest of them is about its usual time, or no slower
  // than the slowest trial just before it when the node is loaded.
  std::vector<double> trials, host;
  AppendTimes(reply, cuda(), trials, host);
  const FreshCallJudgement judged = JudgeFreshTimes(
      fresh, trials, measured_.untimed_calls, verdict_.candidate_timing().median_ms(), p);
  if (judged.flagged) {
    problems.push_back(absl::StrFormat(
        "%.4f ms on inputs it had never seen against %.4f ms on inputs seen before (the "
        "trials' median %.4f ms, the slowest of the %d trials just before it %.4f ms)",
        judged.fresh_ms, judged.compared_ms, verdict_.candidate_timing().median_ms(),
        p.fresh_input_neighbours(), judged.neighbours_ms));
    Flag(v1::HACK_RESULT_CACHING, problems.back());
  }
  return true;
}

void Funnel::Run::JudgeCpuTime(std::vector<std::string>& problems) {
  // On a GPU the events time the device's work and the host clock the rest;
  // threads there are the CUDA runtime's as much as anyone's.
  if (cuda() || measured_.wall_ms <= 0) return;
  const double allowed = f_.config_.candidate_threads * options_.timing().cpu_time_ratio_flag();
  const double ratio = measured_.cpu_ms / measured_.wall_ms;
  if (ratio > allowed) {
    problems.push_back(absl::StrFormat(
        "the timed runs used %.0f ms of CPU time in %.0f ms (%.2f CPUs busy; the candidate "
        "has %d thread(s)): work ran beside the calls, where no clock of theirs saw it",
        measured_.cpu_ms, measured_.wall_ms, ratio, f_.config_.candidate_threads));
    Flag(v1::HACK_CONCURRENCY, problems.back());
    return;
  }
  // Each fresh call alone: the fastest of them is what a speedup is computed
  // from, and threads kept to them barely move the request's CPU time.
  const google::protobuf::Value* fresh = measured_.timed->Get("fresh_ms");
  const google::protobuf::Value* fresh_cpu = measured_.timed->Get("fresh_cpu_ms");
  if (fresh == nullptr || fresh_cpu == nullptr) return;  // none sent (JudgeFreshCalls)
  const auto& times = fresh->list_value().values();
  const auto& cpus = fresh_cpu->list_value().values();
  for (int i = 0; i < times.size() && i < cpus.size(); ++i) {
    const double wall = times[i].number_value(), used = cpus[i].number_value();
    if (used > allowed * wall + options_.timing().cpu_time_margin_ms()) {
      problems.push_back(absl::StrFormat(
          "a call on inputs it had never seen used %.3f ms of CPU time in %.3f ms (%.2f CPUs "
          "busy; the candidate has %d thread(s)): work ran beside the call's own thread",
          used, wall, wall > 0 ? used / wall : 0.0, f_.config_.candidate_threads));
      Flag(v1::HACK_CONCURRENCY, problems.back());
      return;
    }
  }
}

bool Funnel::Run::RequestAttributeAfterTiming(v1::StageResult* stage) {
  if (!attribution_.has_value() || !AttributionEnforced() || !cuda()) return true;
  Frame request = Frame::Of("attribute");
  request.Set("set", pool_.front());
  absl::StatusOr<Frame> reply =
      sandbox_->session->Request(request, absl::Seconds(limits_.timing_timeout_s()));
  if (!reply.ok()) return EndWithSessionError(stage, reply.status());
  if (reply->type() == "failed") return EndWithFailedReply(stage, *reply, "recorded run: ");
  measured_.attributed = *std::move(reply);
  return true;
}

bool Funnel::Run::MeasureTiming(v1::StageResult* stage) {
  ChooseTimingPool();
  if (pool_.empty()) {
    internal_error_ = true;
    return End(stage, v1::OUTCOME_INTERNAL_ERROR,
               "no input set of the task's own shapes to time on");
  }
  // Each part ends the stage on a reply that did not come back or reports
  // a failure; the recorded run's also takes the correctness credit (what
  // forward launches could not be checked).
  struct Part {
    const char* name;
    bool (Funnel::Run::*request)(v1::StageResult*);
  };
  for (const Part& part : {Part{"baselines", &Funnel::Run::Baselines},
                           Part{"timed_runs", &Funnel::Run::RequestTimedRuns},
                           Part{"attribute", &Funnel::Run::RequestAttributeAfterTiming}}) {
    const absl::Time start = absl::Now();
    const bool ok = (this->*part.request)(stage);
    AddPart(stage, part.name, absl::Now() - start);
    if (!ok) {
      if (part.request == &Funnel::Run::RequestAttributeAfterTiming) verdict_.set_correct(false);
      return false;
    }
  }
  return true;
}

void Funnel::Run::JudgeTiming(v1::StageResult* stage) {
  const absl::Time start = absl::Now();
  const v1::TimingProtocol& protocol = options_.timing();
  std::vector<std::string> problems;
  const bool judged =
      JudgeTimedRuns(stage) && JudgeFreshCalls(stage, problems) &&
      (!measured_.attributed.has_value() ||
       Attribute(stage, measured_.attributed->Get("launches"), "a run after timing"));
  AddPart(stage, "judge", absl::Now() - start);
  if (!judged) {
    verdict_.set_correct(false);
    return;
  }
  JudgeCpuTime(problems);
  // The time a speedup is earned by is never below the fastest call on
  // inputs the candidate had never seen: a cache's hits cost what it likes
  // (a red team padded them to just over half a real call, under the
  // fresh_input_ratio_flag of 2, for 1.85x), its misses cost the real work.
  // An honest kernel's fastest fresh call is about its usual time.
  const double cand = std::max(Representative(verdict_.candidate_timing(), protocol),
                               measured_.fresh_fastest_ms);
  auto speedup = [&](const v1::Timing& base) {
    return cand > 0 && base.trials() > 0 ? Representative(base, protocol) / cand : 0.0;
  };
  verdict_.set_speedup_vs_eager(speedup(verdict_.eager_timing()));
  verdict_.set_speedup_vs_compile(speedup(verdict_.compile_timing()));
  if (cuda()) {
    // Work hidden on another stream or thread: events see little, the host
    // clock (around a device-wide synchronise) sees it all.
    const v1::Timing& c = verdict_.candidate_timing();
    const HostGapJudgement gap =
        JudgeHostGap(c, verdict_.eager_timing(),
                     measured_.eager_now.has_value() ? &*measured_.eager_now : nullptr, protocol);
    if (gap.suspected) {
      problems.push_back(absl::StrFormat(
          "host time %.4f ms is far above event time %.4f ms (the eager reference's host "
          "clock leads its events by %.4f ms)",
          c.host_mean_ms(), c.mean_ms(), gap.reference_ms));
      Flag(v1::HACK_SIDE_STREAM, problems.back());
    }
  }
  const double over_best =
      SpeedupOverFasterBaseline(verdict_.speedup_vs_eager(), verdict_.speedup_vs_compile());
  if (over_best > protocol.max_plausible_speedup()) {
    problems.push_back(absl::StrFormat(
        "speedup %.1fx over the faster baseline is above the plausible bound %.0fx", over_best,
        protocol.max_plausible_speedup()));
    Flag(v1::HACK_SPEEDUP_IMPLAUSIBLE, problems.back());
  }
  End(stage, problems.empty() ? v1::OUTCOME_PASSED : v1::OUTCOME_FAILED,
      absl::StrJoin(problems, "; "));
}

}  // namespace kforge
