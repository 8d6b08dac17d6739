#include "cli/job_commands.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/client/rpc_client.h"
#include "common/config/json_config.h"
#include "common/server/process_main.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "kforge/v1/job_service.grpc.pb.h"

namespace kforge {
namespace {

std::unique_ptr<v1::JobService::Stub> Stub(const ClientOptions& options) {
  return v1::JobService::NewStub(options.security.Connect(options.server));
}

int Fail(const ClientOptions& options, const grpc::Status& status) {
  const char* hint = "request refused";
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      hint = options.security.tls() ? "is the learner running, and its certificate signed by "
                                      "--ca_file for this name?"
                                    : "is the learner running? (a TLS learner needs --ca_file)";
      break;
    case grpc::StatusCode::UNAUTHENTICATED:
      hint = "unauthenticated";
      break;
    case grpc::StatusCode::PERMISSION_DENIED:
      hint = "permission denied";
      break;
    default:
      break;
  }
  std::fprintf(stderr, "kforge: %s: %s (%s)\n", options.server.c_str(),
               status.error_message().c_str(), hint);
  return kExitRuntimeError;
}

std::string StateName(v1::JobState state) {
  std::string name = v1::JobState_Name(state);
  return name.rfind("JOB_", 0) == 0 ? name.substr(4) : name;
}

std::string FormatTime(int64_t micros) {
  if (micros == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMicros(micros),
                          absl::LocalTimeZone());
}

void PrintEvent(const v1::JobEvent& event) {
  const std::string when = FormatTime(event.time_us());
  switch (event.event_case()) {
    case v1::JobEvent::kStateChanged:
      std::printf("%s  %s  state %s\n", when.c_str(), event.job_id().c_str(),
                  StateName(event.state_changed()).c_str());
      break;
    case v1::JobEvent::kProgress: {
      const v1::JobProgress& p = event.progress();
      std::printf("%s  %s  step %lld/%lld  version %lld  reward %.3f  correct %.1f%%  %.1f samples/s\n",
                  when.c_str(), event.job_id().c_str(), static_cast<long long>(p.step()),
                  static_cast<long long>(p.total_steps()),
                  static_cast<long long>(p.policy_version()), p.mean_reward(),
                  100 * p.pass_rates().correct(), p.samples_per_second());
      break;
    }
    case v1::JobEvent::kLog:
      std::printf("%s  %s  %s\n", when.c_str(), event.job_id().c_str(), event.log().c_str());
      break;
    case v1::JobEvent::kEval:
      std::printf("%s  %s  eval at step %lld\n", when.c_str(), event.job_id().c_str(),
                  static_cast<long long>(event.eval().step()));
      break;
    case v1::JobEvent::EVENT_NOT_SET:
      break;
  }
  std::fflush(stdout);
}

}  // namespace

int SubmitJob(const ClientOptions& options, const std::string& spec_file) {
  absl::StatusOr<std::string> text = ReadFileToString(spec_file);
  if (!text.ok()) {
    std::fprintf(stderr, "kforge submit: %s\n", std::string(text.status().message()).c_str());
    return kExitConfigError;
  }
  v1::JobSpec spec;
  if (absl::Status parsed = ParseJsonMessage(*text, &spec); !parsed.ok()) {
    std::fprintf(stderr, "kforge submit: %s: %s\n", spec_file.c_str(),
                 std::string(parsed.message()).c_str());
    return kExitConfigError;
  }
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(options.deadline_s));
  v1::Job job;
  if (grpc::Status s = Stub(options)->SubmitJob(&context, spec, &job); !s.ok()) {
    return Fail(options, s);
  }
  if (options.json) {
    std::printf("%s\n", ToJson(job).c_str());
  } else {
    std::printf("submitted %s (%s, queue position %d)\nwatch it with: kforge watch --server %s %s\n",
                job.id().c_str(), StateName(job.state()).c_str(), job.queue_position(),
                options.server.c_str(), job.id().c_str());
  }
  return kExitOk;
}

int ListJobs(const ClientOptions& options) {
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(options.deadline_s));
  v1::ListJobsRequest request;
  v1::ListJobsResponse response;
  if (grpc::Status s = Stub(options)->ListJobs(&context, request, &response); !s.ok()) {
    return Fail(options, s);
  }
  if (options.json) {
    std::printf("%s\n", ToJson(response).c_str());
    return kExitOk;
  }
  std::printf("%-12s %-10s %-12s %-20s %s\n", "ID", "STATE", "STEP", "CREATED", "NAME");
  for (const v1::Job& job : response.jobs()) {
    std::printf("%-12s %-10s %-12s %-20s %s\n", job.id().c_str(), StateName(job.state()).c_str(),
                absl::StrCat(job.progress().step(), "/", job.progress().total_steps()).c_str(),
                FormatTime(job.created_at_us()).c_str(), job.spec().name().c_str());
  }
  return kExitOk;
}

int WatchJob(const ClientOptions& options, const std::string& job_id) {
  // A watch lasts as long as the job; the deadline only bounds a silent
  // server, so it is generous.
  grpc::ClientContext context;
  SetDeadline(context, absl::Hours(24 * 30));
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  request.set_replay(true);  // what happened so far (resumed from, checkpoints), then live
  auto reader = Stub(options)->WatchJob(&context, request);
  v1::JobEvent event;
  while (reader->Read(&event)) {
    if (options.json) {
      std::printf("%s\n", ToJson(event, false).c_str());
      std::fflush(stdout);
    } else {
      PrintEvent(event);
    }
  }
  if (grpc::Status s = reader->Finish(); !s.ok()) return Fail(options, s);
  return kExitOk;
}

int CancelJob(const ClientOptions& options, const std::string& job_id) {
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(options.deadline_s));
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  request.set_reason("cancelled with kforge cancel");
  v1::Job job;
  if (grpc::Status s = Stub(options)->CancelJob(&context, request, &job); !s.ok()) {
    return Fail(options, s);
  }
  std::printf("%s %s\n", job.id().c_str(), StateName(job.state()).c_str());
  return kExitOk;
}

int CheckHealth(const ClientOptions& options, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(options.security.Connect(options.server));
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(options.deadline_s));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  if (grpc::Status s = stub->Check(&context, request, &response); !s.ok()) {
    return Fail(options, s);
  }
  std::printf("%s\n",
              grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()).c_str());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? kExitOk
                                                                             : kExitRuntimeError;
}

}  // namespace kforge
