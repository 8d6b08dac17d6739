#include "verifier_worker/funnel/funnel.h"

#include <signal.h>

#include <filesystem>
#include <optional>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/config/proto_defaults.h"
#include "common/status_macros.h"
#include "verifier_worker/funnel/candidate_session.h"
#include "verifier_worker/funnel/verification.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

}  // namespace

Funnel::Funnel(FunnelConfig config, VerifierMetrics* metrics)
    : config_(std::move(config)), metrics_(metrics), reference_(config_.harness, config_.reference_servers),
      cache_(config_.cache_entries), references_(config_.reference_cache_bytes),
      launchers_(config_.triton_launchers),
      gpu_(config_.timing_stops_requests),
      free_slots_(config_.max_concurrent),
      prefetcher_(config_.reference_prefetch_queue) {}

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
  if (!config_.secret_dirs.empty()) config.Set("secret_dirs", StringList(config_.secret_dirs));
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
  // (A sandbox made on demand does no GPU work before its first request,
  // which holds the device shared.)
  std::optional<GpuArbiter::Shared> shared;
  if (spare) shared.emplace(gpu_, /*pgid=*/0);
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

void Funnel::BuildPendingLaunchers() {
  if (triton_base_cache_.empty()) return;
  absl::MutexLock lock(&launcher_build_mu_);
  absl::StatusOr<std::shared_ptr<ZygoteClient>> zygote = Zygote();
  if (!zygote.ok()) return;
  if (launcher_builder_pid_ > 0 && launcher_builder_zygote_ == *zygote) {
    // One build at a time; what was kept meanwhile waits for the next. A
    // build past the start-up timeout is stuck: ended, its signatures lost
    // (their candidates build their own launchers).
    if (!(*zygote)->WaitExit(launcher_builder_pid_, absl::ZeroDuration()).has_value()) {
      if (absl::Now() - launcher_build_started_ < config_.start_timeout) return;
      ::kill(launcher_builder_pid_, SIGKILL);
    }
  }
  launcher_builder_pid_ = 0;
  launcher_builder_zygote_.reset();
  google::protobuf::Value signatures = launchers_.TakePending();
  if (signatures.list_value().values_size() == 0) return;
  // A build that cannot start costs the next candidates time, not a
  // verdict: they build their launchers themselves.
  absl::StatusOr<int> pid = (*zygote)->BuildLaunchers(triton_base_cache_, config_.harness.device,
                                                     std::move(signatures), config_.start_timeout);
  if (!pid.ok()) return;
  launcher_builder_pid_ = *pid;
  launcher_builder_zygote_ = *zygote;
  launcher_build_started_ = absl::Now();
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
  KF_ASSIGN_OR_RETURN(Frame info, funnel->reference_.First().Call(info_request, funnel->config_.start_timeout));
  funnel->device_name_ = info.GetString("device");
  funnel->has_compile_ = info.GetBool("compile");
  // Baseline timings are only comparable under the same libraries.
  funnel->library_versions_ = absl::StrCat("torch ", info.GetString("torch"), ", triton ",
                                           info.GetString("triton").empty()
                                               ? "absent" : info.GetString("triton"));
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
  BuildPendingLaunchers();
  if (metrics_ != nullptr) metrics_->reference_cache_bytes.Set(static_cast<double>(references_.bytes()));
  if (metrics_ != nullptr) {
    metrics_->in_flight.Decrement();
    metrics_->spare_sandboxes.Set(sandboxes_->ready());
    metrics_->RecordVerdict(verdict);
  }
  return verdict;
}

}  // namespace kforge
