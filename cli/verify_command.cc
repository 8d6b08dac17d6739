#include "cli/verify_command.h"

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cli/local_funnel.h"
#include "common/client/rpc_client.h"
#include "common/config/json_config.h"
#include "common/server/process_main.h"
#include "common/status_macros.h"
#include "kforge/v1/verifier_service.grpc.pb.h"
#include "verifier_worker/funnel/funnel.h"
#include "verifier_worker/verifier_service.h"

namespace kforge {
namespace {

std::string Label(const std::string& enum_name) {
  return enum_name.substr(enum_name.find('_') + 1);
}

absl::StatusOr<v1::Verdict> VerifyInProcess(const VerifyOptions& options,
                                            const v1::VerifyRequest& request) {
  KF_ASSIGN_OR_RETURN(std::unique_ptr<LocalFunnel> local,
                      LocalFunnel::Start(options.python, options.device, 1, 0));
  return local->funnel().Verify(request);
}

absl::StatusOr<v1::Verdict> VerifyRemotely(const VerifyOptions& options,
                                           const v1::VerifyRequest& request) {
  auto stub = v1::VerifierService::NewStub(options.security.Connect(options.server));
  grpc::ClientContext context;
  const auto& limits = request.options().limits();
  SetDeadline(context, absl::Seconds(limits.correctness_timeout_s() + limits.timing_timeout_s() + 60));
  v1::VerifyResponse response;
  grpc::Status status = stub->Verify(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat(options.server, ": ", status.error_message()));
  }
  return response.verdict();
}

void PrintTable(const v1::Verdict& verdict) {
  std::printf("%-12s %-15s %8s  %s\n", "STAGE", "OUTCOME", "SECONDS", "MESSAGE");
  for (const v1::StageResult& stage : verdict.stages()) {
    std::string message = absl::StrReplaceAll(stage.message(), {{"\n", "\n" + std::string(38, ' ')}});
    std::printf("%-12s %-15s %8.3f  %s\n", Label(v1::Stage_Name(stage.stage())).c_str(),
                Label(v1::StageOutcome_Name(stage.outcome())).c_str(), stage.seconds(),
                message.c_str());
  }
  for (const v1::InputSetResult& set : verdict.input_sets()) {
    std::printf("  input set %-18s %s  max abs %.3g  rel L2 %.3g\n", set.name().c_str(),
                set.passed() ? "ok  " : "FAIL", set.max_abs_error(), set.rel_l2_error());
  }
  std::printf("correct: %s   device: %s%s\n", verdict.correct() ? "yes" : "no",
              verdict.device().c_str(), verdict.cached() ? "   (cached)" : "");
  if (verdict.candidate_timing().trials() > 0) {
    std::printf("candidate %.4f ms (cv %.1f%%)   eager %.4f ms   speedup vs eager %.2fx",
                verdict.candidate_timing().mean_ms(), 100 * verdict.candidate_timing().cv(),
                verdict.eager_timing().mean_ms(), verdict.speedup_vs_eager());
    if (verdict.compile_timing().trials() > 0) {
      std::printf("   vs torch.compile %.2fx", verdict.speedup_vs_compile());
    } else {
      std::printf("   vs torch.compile n/a (not run)");
    }
    std::printf("\n");
  }
  for (int i = 0; i < verdict.hack_details_size(); ++i) {
    std::printf("flag %s: %s\n",
                Label(v1::HackFlag_Name(static_cast<v1::HackFlag>(verdict.hack_flags(i)))).c_str(),
                verdict.hack_details(i).c_str());
  }
}

}  // namespace

int RunVerify(const VerifyOptions& options) {
  if (options.task_file.empty() || options.candidate_file.empty()) {
    std::fprintf(stderr, "kforge verify: --task and --candidate are required\n");
    return kExitConfigError;
  }
  v1::VerifyRequest request;
  request.set_request_id("cli");
  for (const auto& [path, field] : {std::pair{options.task_file, 0}, {options.candidate_file, 1}}) {
    absl::StatusOr<std::string> text = ReadFileToString(path);
    if (!text.ok()) {
      std::fprintf(stderr, "kforge verify: %s\n", std::string(text.status().message()).c_str());
      return kExitConfigError;
    }
    if (field == 0) {
      request.mutable_task()->set_reference_source(*text);
      request.mutable_task()->set_id(std::filesystem::path(path).stem().string());
    } else {
      request.set_completion(*text);
    }
  }
  if (!options.options_file.empty()) {
    absl::StatusOr<std::string> text = ReadFileToString(options.options_file);
    absl::Status parsed = text.ok() ? ParseJsonMessage(*text, request.mutable_options()) : text.status();
    if (!parsed.ok()) {
      std::fprintf(stderr, "kforge verify: %s\n", std::string(parsed.message()).c_str());
      return kExitConfigError;
    }
  }
  if (!options.require_triton) request.mutable_options()->set_require_triton(false);
  if (absl::Status s = PrepareVerifyRequest(request); !s.ok()) {
    std::fprintf(stderr, "kforge verify: %s\n", std::string(s.message()).c_str());
    return kExitConfigError;
  }
  absl::StatusOr<v1::Verdict> verdict = options.server.empty() ? VerifyInProcess(options, request)
                                                               : VerifyRemotely(options, request);
  if (!verdict.ok()) {
    std::fprintf(stderr, "kforge verify: %s\n", std::string(verdict.status().message()).c_str());
    return kExitRuntimeError;
  }
  if (options.json) {
    std::printf("%s\n", ToJson(*verdict).c_str());
  } else {
    PrintTable(*verdict);
  }
  return verdict->correct() && verdict->hack_flags_size() == 0 ? kExitOk : kExitRuntimeError;
}

}  // namespace kforge
