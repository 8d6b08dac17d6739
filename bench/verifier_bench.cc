// Verifier benchmarks (issue #3), run by hand; prints tables.
//
//   build/bin/kforge_verifier_bench --device cuda:0 --tasks DIR --candidates DIR
//
// 1. Throughput: candidates verified per second (stages 1-4) on a mixed set
//    (broken syntax, wrong results, correct) through the funnel, with and
//    without spare sandboxes (--spare_sandboxes), against a fresh Python
//    process per candidate doing the same checks; mean seconds per stage.
// 2. Stage-1 rejects per second on one core.
// 3. Start cost of a candidate process: fork from the zygote vs a fresh Python.
// 4. Timing precision: coefficient of variation of one kernel's speedup over
//    repeated verifications.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/config/json_config.h"
#include "common/process/child_process.h"
#include "common/server/executable_path.h"
#include "common/server/work_pool.h"
#include "verifier_worker/sandbox/zygote_client.h"
#include "verifier_worker/funnel/candidate_session.h"
#include "verifier_worker/funnel/funnel.h"
#include "verifier_worker/funnel/timing_stats.h"
#include "verifier_worker/python/python_interpreter.h"
#include "verifier_worker/verifier_service.h"

ABSL_FLAG(std::string, device, "cpu", "cpu or cuda:N");
ABSL_FLAG(std::string, tasks, "", "folder of task files: one per candidate stem (NAME.py)");
ABSL_FLAG(std::string, candidates, "", "folder of correct candidates named like the tasks");
ABSL_FLAG(int, count, 60, "verifications in the throughput runs");
ABSL_FLAG(int, concurrency, 4, "candidates verified at once");
ABSL_FLAG(std::vector<std::string>, spare_sandboxes, std::vector<std::string>({"0", "4"}),
          "spare sandboxes for the funnel throughput runs, one run per value (the last one "
          "also serves the other sections)");
ABSL_FLAG(int, repeats, 20, "verifications for the timing-precision run");
ABSL_FLAG(bool, require_triton, true, "require Triton kernels (off for CPU candidates)");
ABSL_FLAG(bool, precision_only, false, "run only the timing-precision section");
ABSL_FLAG(std::string, timed, "", "candidate stem for the timing-precision run (default: the last)");

namespace kforge {
namespace {

namespace fs = std::filesystem;

struct Item {
  std::string name, task, completion, task_path, candidate_path;
};

std::string Read(const std::string& path) { return ReadFileToString(path).value_or(""); }

// Correct, broken-syntax and wrong-result variants of every candidate.
std::vector<Item> MixedSet(const std::string& work) {
  std::vector<Item> items;
  for (const auto& entry : fs::directory_iterator(absl::GetFlag(FLAGS_candidates))) {
    const std::string stem = entry.path().stem().string();
    const std::string task_path = absl::GetFlag(FLAGS_tasks) + "/" + stem + ".py";
    if (!fs::exists(task_path)) continue;
    const std::string good = Read(entry.path().string());
    std::string wrong = good;
    const size_t ret = wrong.rfind("return out");
    if (ret == std::string::npos) continue;
    wrong.replace(ret, 10, "return out * 1.5");
    const std::string broken = good + "\ndef broken(:\n";
    for (const auto& [kind, text] : {std::pair{"correct", good}, {"wrong", wrong}, {"syntax", broken}}) {
      const std::string path = absl::StrCat(work, "/", stem, "_", kind, ".py");
      (void)WriteFileAtomically(path, text);
      items.push_back({absl::StrCat(stem, "/", kind), Read(task_path), text, task_path, path});
    }
  }
  return items;
}

v1::VerifyRequest Request(const Item& item, bool timing) {
  v1::VerifyRequest request;
  request.set_request_id(item.name);
  request.mutable_task()->set_reference_source(item.task);
  request.set_completion(item.completion);
  request.mutable_options()->set_require_triton(absl::GetFlag(FLAGS_require_triton));
  request.mutable_options()->set_use_cache(false);
  request.mutable_options()->mutable_timing()->set_enabled(timing);
  (void)PrepareVerifyRequest(request);
  return request;
}

double RunConcurrently(int count, int threads, const std::function<void(int)>& work) {
  const absl::Time start = absl::Now();
  {
    WorkPool pool("kf-bench", threads, 2 * threads);
    for (int i = 0; i < count; ++i) pool.Submit([&work, i] { work(i); });
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

int Main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string device = absl::GetFlag(FLAGS_device);
  absl::StatusOr<PythonInfo> python = FindPythonWithTorch("", absl::Seconds(120));
  if (!python.ok()) {
    std::fprintf(stderr, "%s\n", std::string(python.status().message()).c_str());
    return 1;
  }
  const std::string work = absl::StrCat("/tmp/kforge-bench-", ::getpid());
  fs::create_directories(work);
  const std::string harness = SharedDataPath("harness");
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  std::vector<int> spare_counts;
  for (const std::string& value : absl::GetFlag(FLAGS_spare_sandboxes)) {
    int n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 0) {
      std::fprintf(stderr, "--spare_sandboxes: %s is not a count\n", value.c_str());
      return 1;
    }
    spare_counts.push_back(n);
  }
  if (spare_counts.empty()) spare_counts.push_back(0);
  auto make_funnel = [&](int spares) {
    return Funnel::Create({.harness = {.python = python->path, .harness_dir = harness,
                                       .log_dir = work + "/logs", .device = device},
                           .work_dir = absl::StrCat(work, "/candidates-", spares),
                           .max_concurrent = concurrency,
                           .cache_entries = 0,
                           .spare_sandboxes = spares},
                          nullptr);
  };
  auto funnel = make_funnel(spare_counts.back());
  if (!funnel.ok()) {
    std::fprintf(stderr, "%s\n", std::string(funnel.status().message()).c_str());
    return 1;
  }
  const std::vector<Item> items = MixedSet(work);
  if (items.empty()) {
    std::fprintf(stderr, "no candidate in --candidates has a task in --tasks\n");
    return 1;
  }
  // Throughput runs over the small tasks; KernelBench-sized ones (kb_*) only
  // serve the timing-precision run.
  std::vector<Item> small;
  for (const Item& item : items) {
    if (item.name.rfind("kb_", 0) != 0) small.push_back(item);
  }
  const int count = absl::GetFlag(FLAGS_count);
  std::printf("device: %s   python: %s   torch %s   triton %s   mixed set: %zu items\n\n",
              (*funnel)->device_name().c_str(), python->path.c_str(), python->torch_version.c_str(),
              python->triton_version.c_str(), items.size());

  // Sections 1-3; --precision_only skips them.
  auto throughput_and_start_cost = [&] {
  // 1. Throughput, stages 1-4, after one warm-up verification, once per
  // spare count; then the baseline.
  std::printf("| throughput (stages 1-4, %d candidates, %d at once) | candidates/s | vs fresh Python |"
              "\n|---|---|---|\n", count, concurrency);
  std::vector<std::pair<int, double>> funnel_runs;
  std::string stage_table;
  for (int spares : spare_counts) {
    absl::StatusOr<std::unique_ptr<Funnel>> own;
    Funnel* run = funnel->get();
    if (spares != spare_counts.back()) {
      own = make_funnel(spares);
      if (!own.ok()) {
        std::printf("| kforge funnel, %d spare sandboxes | failed to start: %s | |\n", spares,
                    std::string(own.status().message()).c_str());
        continue;
      }
      run = own->get();
    }
    run->Verify(Request(items[0], false));
    // Spares are made in the background: start with them all ready.
    for (int wait = 0; wait < 600 && run->spare_sandboxes_ready() < spares; ++wait) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    std::atomic<int> correct{0};
    absl::Mutex mu;
    std::map<v1::Stage, std::pair<double, int>> stage_seconds;  // sum, count
    const double seconds = RunConcurrently(count, concurrency, [&](int i) {
      const v1::Verdict verdict = run->Verify(Request(small[i % small.size()], false));
      if (verdict.correct()) ++correct;
      absl::MutexLock lock(&mu);
      for (const v1::StageResult& stage : verdict.stages()) {
        stage_seconds[stage.stage()].first += stage.seconds();
        ++stage_seconds[stage.stage()].second;
      }
    });
    funnel_runs.push_back({spares, seconds});
    const SandboxPool::Stats stats = run->sandbox_stats();
    absl::StrAppendFormat(&stage_table, "| %d spares | %lld of %lld |", spares,
                          static_cast<long long>(stats.from_spares),
                          static_cast<long long>(stats.from_spares + stats.made_on_demand));
    for (v1::Stage stage : {v1::STAGE_STATIC, v1::STAGE_COMPILE, v1::STAGE_TINY_RUN,
                            v1::STAGE_MULTI_INPUT}) {
      const auto& [sum, n] = stage_seconds[stage];
      absl::StrAppendFormat(&stage_table, " %.3f (%d) |", n > 0 ? sum / n : 0.0, n);
    }
    absl::StrAppendFormat(&stage_table, " %d of %d |\n", correct.load(), count);
  }
  const std::string sets = "11";
  const double fresh_s = RunConcurrently(count, concurrency, [&](int i) {
    const Item& item = small[i % small.size()];
    auto child = ChildProcess::Spawn({.argv = {python->path, "bench/fresh_python_verify.py",
                                               harness, item.task_path, item.candidate_path,
                                               device, sets},
                                      .capture_output = true});
    if (child.ok()) (void)(*child)->WaitFor(absl::Seconds(600));
  });
  for (const auto& [spares, seconds] : funnel_runs) {
    std::printf("| kforge funnel, %d spare sandboxes (zygote, sandbox, 11 input sets) | %.2f | %.1fx |\n",
                spares, count / seconds, fresh_s / seconds);
  }
  std::printf("| fresh Python per candidate, same checks | %.2f | 1.0x |\n\n", count / fresh_s);
  std::printf("| funnel run | sandboxes from spares | mean s: static | compile | tiny run | "
              "multi-input (verdicts reaching it) | correct |\n|---|---|---|---|---|---|---|\n%s\n",
              stage_table.c_str());
  std::printf("Triton base cache: %s\n\n", (*funnel)->triton_cache_report().c_str());

  // 2. Stage-1 rejects on one core.
  std::vector<Item> rejects;
  for (const Item& item : small) {
    if (item.name.find("/syntax") != std::string::npos) rejects.push_back(item);
  }
  const int reject_count = 200;
  const absl::Time reject_start = absl::Now();
  for (int i = 0; i < reject_count; ++i) {
    v1::VerifyRequest request = Request(rejects[i % rejects.size()], false);
    request.mutable_options()->set_last_stage(v1::STAGE_STATIC);
    (*funnel)->Verify(request);
  }
  std::printf("| stage-1 rejects, one at a time | %.0f /s |\n|---|---|\n\n",
              reject_count / absl::ToDoubleSeconds(absl::Now() - reject_start));

  // 3. Start cost of a candidate process.
  auto zygote = ZygoteClient::Start({.python = python->path, .harness_dir = harness,
                                     .log_dir = work + "/logs-start", .device = device},
                                    absl::Seconds(120));
  if (zygote.ok()) {
    const std::shared_ptr<ZygoteClient> shared_zygote = *std::move(zygote);
    std::vector<double> fork_ms, fresh_ms;
    for (int i = 0; i < 20; ++i) {
      const std::string dir = absl::StrCat(work, "/start", i);
      fs::create_directories(dir);
      Frame config;
      config.Set("work_dir", dir).Set("device", device).Set("max_open_files", 256)
          .Set("max_file_bytes", int64_t{1} << 26).Set("max_processes", 64)
          .Set("memory_bytes", int64_t{8} << 30).Set("threads", 1);
      const absl::Time t0 = absl::Now();
      auto session = CandidateSession::Start(shared_zygote, config.header, absl::Seconds(60));
      if (session.ok()) fork_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    }
    for (int i = 0; i < 5; ++i) {
      const absl::Time t0 = absl::Now();
      auto child = ChildProcess::Spawn(
          {.argv = {python->path, "-c", "import torch, torch.nn\ntry:\n import triton\nexcept ImportError:\n pass"}});
      if (child.ok() && (*child)->WaitFor(absl::Seconds(120)).ok()) {
        fresh_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
      }
    }
    std::printf("| candidate process ready | median ms |\n|---|---|\n");
    std::printf("| forked from the zygote, sandboxed | %.1f |\n", Median(fork_ms));
    std::printf("| fresh Python importing torch (and triton) | %.1f |\n\n", Median(fresh_ms));
  }

  };
  if (!absl::GetFlag(FLAGS_precision_only)) throughput_and_start_cost();

  // 4. Timing precision: one correct kernel verified repeatedly.
  const Item* timed = nullptr;
  for (const Item& item : items) {
    if (item.name.find("/correct") != std::string::npos &&
        item.name.rfind(absl::GetFlag(FLAGS_timed), 0) == 0) {
      timed = &item;
    }
  }
  // Sets of at most 64 MiB keep each verification to seconds; do_bench gets
  // the same inputs.
  constexpr int64_t kPrecisionSetBytes = 64 << 20;
  std::vector<double> speedups, cand_ms;
  for (int i = 0; i < absl::GetFlag(FLAGS_repeats); ++i) {
    v1::VerifyRequest request = Request(*timed, true);
    request.mutable_options()->mutable_multi_input()->set_max_set_bytes(kPrecisionSetBytes);
    const v1::Verdict verdict = (*funnel)->Verify(request);
    // Progress on stderr: a run cut short still shows what it measured.
    std::string stages;
    for (const v1::StageResult& stage : verdict.stages()) {
      absl::StrAppendFormat(&stages, " %s %.2fs", v1::Stage_Name(stage.stage()), stage.seconds());
    }
    std::fprintf(stderr,
                 "precision run %d: %.1f s (%s), speedup %.4f, candidate %.4f ms over %d trials "
                 "(trial cv %.1f%%), eager %.4f ms over %d trials, %s\n",
                 i, verdict.total_seconds(), stages.c_str(), verdict.speedup_vs_eager(),
                 verdict.candidate_timing().mean_ms(), verdict.candidate_timing().trials(),
                 100 * verdict.candidate_timing().cv(), verdict.eager_timing().mean_ms(),
                 verdict.eager_timing().trials(),
                 verdict.stages().empty() ? "" : verdict.stages().rbegin()->message().c_str());
    if (verdict.candidate_timing().trials() == 0) continue;
    speedups.push_back(verdict.speedup_vs_eager());
    cand_ms.push_back(verdict.candidate_timing().mean_ms());
  }
  std::printf("| timing precision (%s, %zu verifications) | value |\n|---|---|\n",
              timed->name.c_str(), speedups.size());
  std::printf("| median speedup vs eager | %.3f |\n", Median(speedups));
  std::printf("| CV of the speedup | %.2f%% |\n", 100 * CoefficientOfVariation(speedups));
  std::printf("| CV of the candidate time | %.2f%% |\n", 100 * CoefficientOfVariation(cand_ms));
  if (device.rfind("cuda", 0) == 0) {
    auto bench = ChildProcess::Spawn({.argv = {python->path, "bench/do_bench_reference.py", harness,
                                               timed->task_path, timed->candidate_path, device,
                                               std::to_string(kPrecisionSetBytes)},
                                      .capture_output = true});
    if (bench.ok() && (*bench)->WaitFor(absl::Seconds(300)).ok()) {
      double do_bench_ms = 0, do_bench_eager = 0;
      std::sscanf((*bench)->output().c_str(), "%lf %lf", &do_bench_ms, &do_bench_eager);
      std::printf("| kforge candidate time (median of verifications) | %.4f ms |\n", Median(cand_ms));
      std::printf("| triton.testing.do_bench, same inputs | %.4f ms |\n", do_bench_ms);
      std::printf("| difference | %.1f%% |\n", 100 * (Median(cand_ms) / do_bench_ms - 1));
      std::printf("| do_bench speedup vs eager | %.3f |\n", do_bench_eager / do_bench_ms);
    } else {
      std::printf("| do_bench | failed: %s |\n", bench.ok() ? (*bench)->output().c_str() : "spawn");
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
