#include "verifier_worker/sandbox/reference_client.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kforge {

absl::StatusOr<Frame> ReferenceClient::Call(const Frame& request, absl::Duration timeout) {
  Held held(*this);
  return held.Call(request, timeout);
}

absl::StatusOr<Frame> ReferenceClient::CallHeld(const Frame& request, absl::Duration timeout) {
  if (!process_.has_value() || process_->process->Poll().has_value()) {
    KF_ASSIGN_OR_RETURN(HarnessProcess started,
                        StartHarnessProcess(setup_, "kforge_harness.reference_server"));
    process_.emplace(std::move(started));
  }
  absl::Status sent = process_->channel.Send(request, request.AttachedFds());
  absl::StatusOr<Frame> reply =
      sent.ok() ? process_->channel.Receive(absl::Now() + timeout) : absl::StatusOr<Frame>(sent);
  if (reply.ok()) {
    if (absl::Status adopted = AdoptReplyBuffer(request, *reply); !adopted.ok()) {
      reply = adopted;
    }
  }
  if (!reply.ok()) {
    // Whatever state it is in, a fresh one answers the next call.
    process_.reset();
    return absl::UnavailableError(absl::StrCat("reference server ('", request.type(),
                                               "'): ", reply.status().message(), " (see ",
                                               setup_.log_dir, "/reference_server.log)"));
  }
  if (reply->type() == "error") {
    return absl::InternalError(absl::StrCat(reply->GetString("message"), "\n",
                                            reply->GetString("traceback")));
  }
  return reply;
}

}  // namespace kforge
