// The verifier on a GRPO-shaped batch (issue #21), run by hand; prints tables
// and writes every verdict as JSON for comparison with KernelBench's harness
// (bench/kernelbench_peer.py, bench/compare_batch.py).
//
//   python3 bench/make_grpo_batch.py --kernelbench DIR --out /tmp/batch
//   build/bin/kforge_verifier_batch_bench --batch /tmp/batch/batch.json
//       --devices cuda:0,cuda:1 --gpu_counts 1,2 --out /tmp/kforge_batch.json
//
// For each entry of --gpu_counts it starts one funnel per GPU (one verifier
// per GPU, as a node runs them; their start-up is reported, not timed in the
// batch) with cold caches, sends the whole batch at once through a dispatcher
// that hands each candidate to its task's funnel by the rollout worker's
// affinity rule (rollout_worker/dispatch/task_affinity.h; --task_affinity
// false: the least busy funnel), and reports: batch wall
// time, candidates per second per GPU, verdicts by kind, seconds per correct
// candidate (median and p90, with and without each task's first candidate,
// which computes the task's reference epoch and baselines) and the mean
// seconds of each stage. After the first run, on its funnels, one kernel is
// verified --cv_repeats times interleaved with as many correct candidates of
// other tasks, all sent at once as a batch is, for the spread of its
// measured time and speedup: once per --cv_launch_cover_ms value, so timing
// protocols are compared side by side on the same warm funnels. Before that
// (--one_at_a_time), one correct candidate of each level-1 task is verified
// alone, one after another, with the batch's reference epochs and baselines
// cached: what a correct candidate costs with no other candidate competing
// for the CPU or the GPU, as the "22-54 s" was measured.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"
#include "common/server/executable_path.h"
#include "common/server/work_pool.h"
#include "rollout_worker/dispatch/task_affinity.h"
#include "verifier_worker/funnel/funnel.h"
#include "verifier_worker/funnel/timing_stats.h"
#include "verifier_worker/python/python_interpreter.h"
#include "verifier_worker/verifier_service.h"

ABSL_FLAG(std::string, batch, "", "batch.json from bench/make_grpo_batch.py");
ABSL_FLAG(std::vector<std::string>, devices, std::vector<std::string>({"cuda:0"}),
          "devices, one verifier funnel each");
ABSL_FLAG(std::vector<std::string>, gpu_counts, std::vector<std::string>({"1"}),
          "one batch run per entry, on that many of --devices");
ABSL_FLAG(int, concurrency, 8, "candidates in stages 1-4 at once per funnel (max_concurrent)");
ABSL_FLAG(int, spare_sandboxes, 4, "spare sandboxes per funnel");
ABSL_FLAG(int, reference_servers, 4, "reference servers per funnel (FunnelConfig.reference_servers)");
ABSL_FLAG(bool, timing_stops_requests, false,
          "a timing stops correctness requests in flight (FunnelConfig.timing_stops_requests)");
ABSL_FLAG(double, correctness_timeout_s, 20, "SandboxLimits.correctness_timeout_s");
ABSL_FLAG(std::string, cv_task, "level1/23_Softmax", "task whose first correct candidate the CV run repeats");
ABSL_FLAG(int, cv_repeats, 20, "verifications of the CV candidate");
ABSL_FLAG(std::string, out, "", "write every verdict here as JSON");
ABSL_FLAG(bool, task_affinity, true,
          "place a task's candidates on one GPU's funnel as a node's rollout workers do "
          "(RolloutWorkerConfig.verifier_task_affinity); false: the least busy funnel");
ABSL_FLAG(int, affinity_slack, 4, "RolloutWorkerConfig.verifier_affinity_slack");
ABSL_FLAG(double, launch_cover_ms, -1,
          "TimingProtocol.launch_cover_ms of the batch runs (-1: the proto's default)");
ABSL_FLAG(bool, warm_variant_sets, true,
          "MultiInputOptions.warm_variant_sets: variant sets' compiles overlap one another");
ABSL_FLAG(bool, one_at_a_time, true,
          "after the first run, on its warm funnels: one correct candidate of each level-1 "
          "task verified alone, one after another (reference and baselines cached)");
ABSL_FLAG(bool, overlap_warm_up, true,
          "MultiInputOptions.overlap_warm_up of the batch runs: the warm-up beside the sets");
ABSL_FLAG(int, alone_repeats, 2,
          "verifications of each candidate of the one-at-a-time run, in a row; its figures are "
          "the last one's (the task's reference epoch and baselines then surely cached)");
ABSL_FLAG(std::vector<std::string>, alone_overlap, std::vector<std::string>({"true", "false"}),
          "the one-at-a-time run once per value of MultiInputOptions.overlap_warm_up, in order");
ABSL_FLAG(int, triton_launchers, 256,
          "FunnelConfig.triton_launchers: launcher signatures built ahead into the base cache");
ABSL_FLAG(std::vector<std::string>, cv_launch_cover_ms, std::vector<std::string>({"-1"}),
          "the spread run once per value, in order, side by side (-1: the proto's default)");

namespace kforge {
namespace {

namespace fs = std::filesystem;

struct Item {
  std::string id, task, kind, task_source, completion;
};

struct Result {
  const Item* item;
  v1::Verdict verdict;
  int funnel;
};

absl::StatusOr<std::vector<Item>> LoadBatch(const std::string& path) {
  KF_ASSIGN_OR_RETURN(std::string json, ReadFileToString(path));
  google::protobuf::ListValue list;
  if (!google::protobuf::util::JsonStringToMessage(json, &list).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON list"));
  }
  std::vector<Item> items;
  for (const auto& value : list.values()) {
    const auto& f = value.struct_value().fields();
    Item item{.id = f.at("id").string_value(), .task = f.at("task").string_value(),
              .kind = f.at("kind").string_value()};
    KF_ASSIGN_OR_RETURN(item.task_source, ReadFileToString(f.at("task_file").string_value()));
    KF_ASSIGN_OR_RETURN(item.completion, ReadFileToString(f.at("candidate").string_value()));
    items.push_back(std::move(item));
  }
  return items;
}

v1::VerifyRequest Request(const Item& item, const std::string& batch_id, double launch_cover_ms) {
  v1::VerifyRequest request;
  request.set_request_id(item.id);
  request.set_batch_id(batch_id);
  request.mutable_task()->set_reference_source(item.task_source);
  request.set_completion(item.completion);
  request.mutable_options()->set_use_cache(false);
  request.mutable_options()->mutable_limits()->set_correctness_timeout_s(
      absl::GetFlag(FLAGS_correctness_timeout_s));
  if (launch_cover_ms >= 0) {
    request.mutable_options()->mutable_timing()->set_launch_cover_ms(launch_cover_ms);
  }
  request.mutable_options()->mutable_multi_input()->set_warm_variant_sets(
      absl::GetFlag(FLAGS_warm_variant_sets));
  request.mutable_options()->mutable_multi_input()->set_overlap_warm_up(
      absl::GetFlag(FLAGS_overlap_warm_up));
  (void)PrepareVerifyRequest(request);
  return request;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// Verifies `items` on `funnels`: every candidate handed to its task's funnel
// (--task_affinity, the rollout worker's rule over the funnels' devices) or
// else the one with the fewest verifications in flight.
std::vector<Result> RunBatch(const std::vector<Item>& items,
                             const std::vector<std::unique_ptr<Funnel>>& funnels,
                             const std::vector<std::string>& devices, const std::string& batch_id,
                             double launch_cover_ms, double* wall_s) {
  std::vector<Result> results(items.size());
  std::vector<std::atomic<int>> busy(funnels.size());
  std::atomic<int> done{0};
  absl::Mutex pick;
  const absl::Time start = absl::Now();
  {
    const int threads = static_cast<int>(funnels.size()) * (absl::GetFlag(FLAGS_concurrency) + 2);
    WorkPool pool("kf-batch", threads, 2 * threads);
    for (size_t i = 0; i < items.size(); ++i) {
      pool.Submit([&, i] {
        int chosen = 0;
        {
          absl::MutexLock lock(&pick);
          std::vector<int> in_flight;
          for (const std::atomic<int>& b : busy) in_flight.push_back(b.load());
          std::optional<size_t> preferred;
          if (absl::GetFlag(FLAGS_task_affinity)) {
            preferred = AffinityChoice(items[i].task, std::span(devices).first(funnels.size()),
                                       in_flight, absl::GetFlag(FLAGS_affinity_slack));
          }
          if (preferred.has_value()) {
            chosen = static_cast<int>(*preferred);
          } else {
            chosen = static_cast<int>(std::min_element(in_flight.begin(), in_flight.end()) -
                                      in_flight.begin());
          }
          ++busy[chosen];
        }
        results[i] = {&items[i],
                      funnels[chosen]->Verify(Request(items[i], batch_id, launch_cover_ms)),
                      chosen};
        --busy[chosen];
        const v1::Verdict& v = results[i].verdict;
        std::string stages;
        for (const v1::StageResult& s : v.stages()) {
          absl::StrAppendFormat(&stages, " %s=%.2f", v1::Stage_Name(s.stage()).substr(6),
                                s.seconds());
        }
        // One line per verdict as it lands: a run cut short still says
        // what it measured.
        std::printf("[%3d/%zu %6.1fs] %-70s %-7s correct=%d total=%.2fs%s\n", ++done,
                    items.size(), absl::ToDoubleSeconds(absl::Now() - start),
                    items[i].id.c_str(), items[i].kind.c_str(), v.correct(), v.total_seconds(),
                    stages.c_str());
      });
    }
  }
  *wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  return results;
}

void PrintRun(const std::vector<Result>& results, int gpus, double wall_s, double start_s) {
  std::map<std::string, std::map<std::string, int>> by_kind;  // kind -> outcome -> n
  std::vector<double> correct_s, correct_l1_s, warm_l1_s;
  // The same without the time spent waiting for the GPU (another candidate
  // being timed, or timing waiting to have it alone) and for a correctness
  // slot (the batch arrives at once; Verdict.queue_seconds): what a
  // verification itself costs, which concurrency cannot hide.
  std::vector<double> own_l1_s, own_warm_l1_s, waits_s;
  // The same, also without the time waiting for the task's reference epoch
  // while another candidate of the task made it (Verdict.reference_seconds):
  // reference work a task pays once, whoever waits for it.
  std::vector<double> own_ready_l1_s;
  std::map<std::string, double> stage_sum;
  std::map<std::string, int> stage_n;
  // Per stage and part (StageResult.part_seconds) of the correct level-1
  // candidates whose reference and baselines were cached.
  std::map<std::string, std::vector<double>> parts;
  // Per input set of correct candidates (its name without a fit suffix):
  // round trip, of it the candidate's calls, and the comparison.
  struct SetSeconds {
    std::vector<double> round_trip, call, compare;
  };
  std::map<std::string, SetSeconds> sets;
  int correct = 0;
  for (const Result& r : results) {
    const v1::Verdict& v = r.verdict;
    const std::string outcome =
        v.correct() ? (v.stages().rbegin()->outcome() == v1::OUTCOME_PASSED ? "correct"
                                                                            : "correct, timing flagged")
                    : absl::StrCat(v1::Stage_Name(v.stage_reached()).substr(6), " ",
                                   v1::StageOutcome_Name(v.stages().rbegin()->outcome()).substr(8));
    ++by_kind[r.item->kind][outcome];
    if (!v.correct()) continue;
    ++correct;
    correct_s.push_back(v.total_seconds());
    waits_s.push_back(v.device_wait_seconds());
    const double own = v.total_seconds() - v.device_wait_seconds() - v.queue_seconds();
    if (absl::StartsWith(r.item->task, "level1/")) {
      correct_l1_s.push_back(v.total_seconds());
      own_l1_s.push_back(own);
      if (v.reference_reused() && v.baselines_cached()) {
        warm_l1_s.push_back(v.total_seconds());
        own_warm_l1_s.push_back(own);
        own_ready_l1_s.push_back(own - v.reference_seconds());
        for (const v1::StageResult& s : v.stages()) {
          for (const auto& [part, seconds] : s.part_seconds()) {
            parts[absl::StrCat(v1::Stage_Name(s.stage()).substr(6), ".", part)].push_back(seconds);
          }
        }
      }
    }
    for (const v1::StageResult& s : v.stages()) {
      stage_sum[v1::Stage_Name(s.stage()).substr(6)] += s.seconds();
      ++stage_n[v1::Stage_Name(s.stage()).substr(6)];
    }
    for (const v1::InputSetResult& set : v.input_sets()) {
      SetSeconds& seconds = sets[set.name().substr(0, set.name().find('@'))];
      seconds.round_trip.push_back(set.seconds());
      seconds.call.push_back(set.call_seconds());
      seconds.compare.push_back(set.compare_seconds());
    }
  }
  std::printf("\n== %d GPU(s): %zu candidates, funnels started in %.1f s ==\n", gpus,
              results.size(), start_s);
  std::printf("batch wall time            %8.1f s\n", wall_s);
  std::printf("candidates/s per GPU       %8.2f\n", results.size() / wall_s / gpus);
  std::printf("correct                    %8d\n", correct);
  std::printf("s per correct candidate    median %.2f  p90 %.2f  (all levels)\n",
              Percentile(correct_s, 0.5), Percentile(correct_s, 0.9));
  std::printf("s per correct L1 candidate median %.2f  p90 %.2f  (n=%zu)\n",
              Percentile(correct_l1_s, 0.5), Percentile(correct_l1_s, 0.9), correct_l1_s.size());
  std::printf("  with reference and baselines cached: median %.2f  p90 %.2f  (n=%zu)\n",
              Percentile(warm_l1_s, 0.5), Percentile(warm_l1_s, 0.9), warm_l1_s.size());
  std::printf("of that, waiting for the GPU: median %.2f  p90 %.2f  (all levels)\n",
              Percentile(waits_s, 0.5), Percentile(waits_s, 0.9));
  std::printf("s per correct L1 candidate, without the GPU and slot waits: median %.2f  p90 %.2f\n",
              Percentile(own_l1_s, 0.5), Percentile(own_l1_s, 0.9));
  std::printf("  with reference and baselines cached: median %.2f  p90 %.2f  (n=%zu)\n",
              Percentile(own_warm_l1_s, 0.5), Percentile(own_warm_l1_s, 0.9),
              own_warm_l1_s.size());
  std::printf("    and without waiting for the task's reference epoch: median %.2f  p90 %.2f\n",
              Percentile(own_ready_l1_s, 0.5), Percentile(own_ready_l1_s, 0.9));
  std::printf("    their parts, median s (GPU waits included):");
  for (const auto& [part, seconds] : parts) {
    std::printf("  %s %.3f", part.c_str(), Percentile(seconds, 0.5));
  }
  std::printf("\n");
  std::printf("mean s per stage of correct candidates (GPU waits included):");
  for (const auto& [stage, sum] : stage_sum) std::printf("  %s %.2f", stage.c_str(), sum / stage_n[stage]);
  std::printf("\nper input set of correct candidates, median s: round trip (of it the "
              "candidate's calls as its harness timed them) + compare here\n");
  double sum_round_trip = 0, sum_call = 0, sum_compare = 0;
  for (const auto& [name, seconds] : sets) {
    const double round_trip = Percentile(seconds.round_trip, 0.5);
    const double call = Percentile(seconds.call, 0.5);
    const double compare = Percentile(seconds.compare, 0.5);
    sum_round_trip += round_trip;
    sum_call += call;
    sum_compare += compare;
    std::printf("  %-16s n=%-3zu %6.3f (%6.3f) + %6.3f\n", name.c_str(), seconds.round_trip.size(),
                round_trip, call, compare);
  }
  std::printf("  %-16s       %6.3f (%6.3f) + %6.3f\n", "sum of medians", sum_round_trip, sum_call,
              sum_compare);
  std::printf("verdicts by kind:\n");
  for (const auto& [kind, outcomes] : by_kind) {
    std::printf("  %-8s", kind.c_str());
    for (const auto& [outcome, n] : outcomes) std::printf("  %d %s;", n, outcome.c_str());
    std::printf("\n");
  }
}

google::protobuf::Value ResultJson(const Result& r) {
  google::protobuf::Value value;
  auto& f = *value.mutable_struct_value()->mutable_fields();
  f["id"].set_string_value(r.item->id);
  f["kind"].set_string_value(r.item->kind);
  f["funnel"].set_number_value(r.funnel);
  std::string verdict_json;
  (void)google::protobuf::util::MessageToJsonString(r.verdict, &verdict_json);
  google::protobuf::Value verdict;
  (void)google::protobuf::util::JsonStringToMessage(verdict_json, &verdict);
  verdict.mutable_struct_value()->mutable_fields()->erase("extractedCode");
  f["verdict"] = verdict;
  return value;
}

void CvRun(const std::vector<Item>& items, const std::vector<std::unique_ptr<Funnel>>& funnels,
           const std::vector<std::string>& devices, double launch_cover_ms, int round) {
  const Item* timed = nullptr;
  std::vector<const Item*> others;
  for (const Item& item : items) {
    if (item.kind != "correct") continue;
    if (item.task == absl::GetFlag(FLAGS_cv_task)) {
      if (timed == nullptr) timed = &item;
    } else {
      others.push_back(&item);
    }
  }
  if (timed == nullptr || others.empty() || absl::GetFlag(FLAGS_cv_repeats) <= 0) return;
  // Timed and other candidates alternate in the submission order, and the
  // timings (the GPU held alone) of both come in whatever order they pass.
  std::vector<Item> cv_items;
  for (int i = 0; i < absl::GetFlag(FLAGS_cv_repeats); ++i) {
    cv_items.push_back(*others[i % others.size()]);
    cv_items.back().id = absl::StrCat(cv_items.back().id, "#cv", round, "-", i);
    cv_items.push_back(*timed);
    cv_items.back().id = absl::StrCat(timed->id, "#cv", round, "-", i);
  }
  double wall_s = 0;
  // A batch id of its own per round: each round's candidates meet a new
  // reference epoch, as a GRPO step's would.
  const std::vector<Result> results =
      RunBatch(cv_items, funnels, devices, absl::StrCat("cv-", round), launch_cover_ms, &wall_s);
  std::vector<double> cand_ms, speedups;
  for (const Result& r : results) {
    if (r.item->task != timed->task || !r.verdict.correct()) continue;
    cand_ms.push_back(r.verdict.candidate_timing().mean_ms());
    speedups.push_back(r.verdict.speedup_vs_eager());
  }
  std::printf("\n== timing spread: %s verified %zu times among as many others (%.1f s), "
              "launch_cover_ms %s ==\n",
              timed->id.c_str(), cand_ms.size(), wall_s,
              launch_cover_ms < 0 ? "default" : absl::StrFormat("%g", launch_cover_ms).c_str());
  std::printf("candidate ms, in the order verified:");
  for (double ms : cand_ms) std::printf(" %.4f", ms);
  std::printf("\n");
  std::printf("candidate ms: median %.4f  CV %.2f%%\n", Median(cand_ms),
              100 * CoefficientOfVariation(cand_ms));
  std::printf("speedup vs eager: median %.3f  CV %.2f%%\n", Median(speedups),
              100 * CoefficientOfVariation(speedups));
}

void OneAtATimeRun(const std::vector<Item>& items,
                   const std::vector<std::unique_ptr<Funnel>>& funnels,
                   const std::vector<std::string>& devices, const std::string& batch_id,
                   double launch_cover_ms, bool overlap) {
  std::map<std::string, const Item*> by_task;  // the first correct candidate of each L1 task
  for (const Item& item : items) {
    if (item.kind == "correct" && absl::StartsWith(item.task, "level1/")) {
      by_task.emplace(item.task, &item);
    }
  }
  if (by_task.empty()) return;
  const int repeats = std::max(1, absl::GetFlag(FLAGS_alone_repeats));
  std::printf("\n== one at a time: one correct candidate of each of %zu level-1 tasks, alone, "
              "%d times in a row (figures: the last), overlap_warm_up=%d ==\n",
              by_task.size(), repeats, overlap);
  std::vector<double> totals, own_s;
  std::map<std::string, std::vector<double>> parts;
  const std::vector<int> idle(funnels.size(), 0);
  for (const auto& [task, item] : by_task) {
    // The funnel the batch gave the task (its epoch and baselines are there).
    size_t chosen = 0;
    if (absl::GetFlag(FLAGS_task_affinity)) {
      chosen = AffinityChoice(task, std::span(devices).first(funnels.size()), idle,
                              absl::GetFlag(FLAGS_affinity_slack))
                   .value_or(0);
    }
    v1::VerifyRequest request = Request(*item, batch_id, launch_cover_ms);
    request.mutable_options()->mutable_multi_input()->set_overlap_warm_up(overlap);
    v1::Verdict v;
    for (int r = 0; r < repeats; ++r) {
      request.set_request_id(absl::StrCat(item->id, "#alone", r));
      v = funnels[chosen]->Verify(request);
    }
    const double own = v.total_seconds() - v.device_wait_seconds() - v.queue_seconds() -
                       v.reference_seconds();
    std::string stages;
    for (const v1::StageResult& s : v.stages()) {
      absl::StrAppendFormat(&stages, " %s=%.2f", v1::Stage_Name(s.stage()).substr(6), s.seconds());
      for (const auto& [part, seconds] : s.part_seconds()) {
        parts[absl::StrCat(v1::Stage_Name(s.stage()).substr(6), ".", part)].push_back(seconds);
      }
    }
    std::printf("  %-60s correct=%d cached=%d/%d total=%.2fs own=%.2fs%s\n", item->id.c_str(),
                v.correct(), v.reference_reused(), v.baselines_cached(), v.total_seconds(), own,
                stages.c_str());
    if (!v.correct()) continue;
    totals.push_back(v.total_seconds());
    own_s.push_back(own);
  }
  std::printf("s per correct L1 candidate alone: median %.2f  p90 %.2f  (n=%zu); without GPU, "
              "slot and reference waits: median %.2f  p90 %.2f\n",
              Percentile(totals, 0.5), Percentile(totals, 0.9), totals.size(),
              Percentile(own_s, 0.5), Percentile(own_s, 0.9));
  std::printf("  parts, median s:");
  for (const auto& [part, seconds] : parts) std::printf("  %s %.3f", part.c_str(), Percentile(seconds, 0.5));
  std::printf("\n");
}

int Main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::StatusOr<std::vector<Item>> items = LoadBatch(absl::GetFlag(FLAGS_batch));
  absl::StatusOr<PythonInfo> python = FindPythonWithTorch("", absl::Seconds(120));
  if (!items.ok() || !python.ok()) {
    std::fprintf(stderr, "%s\n",
                 std::string((items.ok() ? python.status() : items.status()).message()).c_str());
    return 1;
  }
  const std::vector<std::string> devices = absl::GetFlag(FLAGS_devices);
  google::protobuf::Value runs_json;
  for (const std::string& count_text : absl::GetFlag(FLAGS_gpu_counts)) {
    int gpus = 0;
    if (!absl::SimpleAtoi(count_text, &gpus) || gpus < 1 || gpus > static_cast<int>(devices.size())) {
      std::fprintf(stderr, "--gpu_counts: %s is not between 1 and %zu\n", count_text.c_str(),
                   devices.size());
      return 1;
    }
    const absl::Time start = absl::Now();
    std::vector<std::unique_ptr<Funnel>> funnels;
    for (int g = 0; g < gpus; ++g) {
      const std::string work = absl::StrCat("/tmp/kforge-batch-", ::getpid(), "-", gpus, "-", g);
      absl::StatusOr<std::unique_ptr<Funnel>> funnel = Funnel::Create(
          {.harness = {.python = python->path, .harness_dir = SharedDataPath("harness"),
                       .log_dir = work + "/logs", .device = devices[g]},
           .work_dir = work + "/candidates",
           .max_concurrent = absl::GetFlag(FLAGS_concurrency),
           .cache_entries = 0,
           .spare_sandboxes = absl::GetFlag(FLAGS_spare_sandboxes),
           .reference_servers = absl::GetFlag(FLAGS_reference_servers),
           .timing_stops_requests = absl::GetFlag(FLAGS_timing_stops_requests),
           .triton_launchers = absl::GetFlag(FLAGS_triton_launchers)},
          nullptr);
      if (!funnel.ok()) {
        std::fprintf(stderr, "%s: %s\n", devices[g].c_str(),
                     std::string(funnel.status().message()).c_str());
        return 1;
      }
      funnels.push_back(*std::move(funnel));
    }
    const double start_s = absl::ToDoubleSeconds(absl::Now() - start);
    double wall_s = 0;
    const std::vector<Result> results =
        RunBatch(*items, funnels, devices, absl::StrCat("grpo-step-", gpus),
                 absl::GetFlag(FLAGS_launch_cover_ms), &wall_s);
    PrintRun(results, gpus, wall_s, start_s);
    google::protobuf::Value run;
    auto& f = *run.mutable_struct_value()->mutable_fields();
    f["gpus"].set_number_value(gpus);
    f["wall_s"].set_number_value(wall_s);
    for (const Result& r : results) *f["items"].mutable_list_value()->add_values() = ResultJson(r);
    *runs_json.mutable_list_value()->add_values() = run;
    if (!absl::GetFlag(FLAGS_out).empty()) {  // after every run: a later one may not finish
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(runs_json, &json);
      (void)WriteFileAtomically(absl::GetFlag(FLAGS_out), json);
    }
    // The spread run uses the first run's warm funnels; each run's funnels
    // are gone before the next starts, so no run shares a GPU with another.
    if (runs_json.list_value().values_size() == 1) {
      if (absl::GetFlag(FLAGS_one_at_a_time)) {
        for (const std::string& overlap_text : absl::GetFlag(FLAGS_alone_overlap)) {
          bool overlap = true;
          if (!absl::SimpleAtob(overlap_text, &overlap)) {
            std::fprintf(stderr, "--alone_overlap: %s is not a bool\n", overlap_text.c_str());
            return 1;
          }
          OneAtATimeRun(*items, funnels, devices, absl::StrCat("grpo-step-", gpus),
                        absl::GetFlag(FLAGS_launch_cover_ms), overlap);
        }
        std::printf("triton launchers built ahead: %d signature(s) kept\n",
                    funnels.front()->triton_launchers_kept());
      }
      int round = 0;
      for (const std::string& cover_text : absl::GetFlag(FLAGS_cv_launch_cover_ms)) {
        double cover = -1;
        if (!absl::SimpleAtod(cover_text, &cover)) {
          std::fprintf(stderr, "--cv_launch_cover_ms: %s is not a number\n", cover_text.c_str());
          return 1;
        }
        CvRun(*items, funnels, devices, cover, round++);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return kforge::Main();
}
