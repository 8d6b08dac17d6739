#include "verifier_worker/sandbox/zygote_client.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kforge {

absl::StatusOr<std::unique_ptr<ZygoteClient>> ZygoteClient::Start(const HarnessSetup& setup,
                                                                  absl::Duration start_timeout) {
  KF_ASSIGN_OR_RETURN(HarnessProcess process, StartHarnessProcess(setup, "kforge_harness.zygote"));
  std::unique_ptr<ZygoteClient> client(new ZygoteClient(std::move(process)));
  absl::StatusOr<Frame> pong = client->Call(Frame::Of("ping"), -1, start_timeout);
  if (!pong.ok()) {
    return absl::UnavailableError(absl::StrCat("the zygote did not start (see ", setup.log_dir,
                                               "/zygote.log): ", pong.status().message()));
  }
  client->hello_ = *std::move(pong);
  return client;
}

ZygoteClient::ZygoteClient(HarnessProcess process)
    : process_(std::move(process)), reader_([this] {
        pthread_setname_np(pthread_self(), "kf-zygote-read");
        ReadLoop();
      }) {}

ZygoteClient::~ZygoteClient() {
  // Closing our end makes the zygote's read fail and exit; the reader sees
  // EOF. Shut down rather than close so the reader is not left on a dead fd.
  ::shutdown(process_.channel.fd(), SHUT_RDWR);
  reader_.join();
  process_.process->Terminate(absl::Seconds(5));
}

bool ZygoteClient::alive() const {
  absl::MutexLock lock(&mu_);
  return !dead_;
}

void ZygoteClient::ReadLoop() {
  for (;;) {
    absl::StatusOr<Frame> frame = process_.channel.Receive(absl::InfiniteFuture());
    absl::MutexLock lock(&mu_);
    if (!frame.ok()) {
      dead_ = true;
      changed_.SignalAll();
      return;
    }
    if (frame->type() == "exited") {
      ExitInfo info;
      if (frame->Get("signal") != nullptr) {
        info.signal = static_cast<int>(frame->GetNumber("signal"));
      } else {
        info.exited = true;
        info.code = static_cast<int>(frame->GetNumber("exit_code"));
      }
      exits_[static_cast<int>(frame->GetNumber("pid"))] = info;
    } else {
      const std::string id = frame->GetString("id");
      replies_[id] = *std::move(frame);
    }
    changed_.SignalAll();
  }
}

absl::StatusOr<Frame> ZygoteClient::Call(Frame request, int attach_fd, absl::Duration timeout) {
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    if (dead_) return absl::UnavailableError("the zygote has exited");
    id = absl::StrCat(next_id_++);
  }
  request.Set("id", id);
  {
    absl::MutexLock lock(&send_mu_);
    KF_RETURN_IF_ERROR(process_.channel.Send(request, attach_fd));
  }
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (!replies_.contains(id)) {
    if (dead_) return absl::UnavailableError("the zygote exited before answering");
    if (changed_.WaitWithDeadline(&mu_, deadline)) {
      return absl::DeadlineExceededError(absl::StrCat("the zygote did not answer '",
                                                      request.type(), "' in time"));
    }
  }
  Frame reply = std::move(replies_[id]);
  replies_.erase(id);
  if (reply.type() == "error") {
    return absl::InternalError(absl::StrCat("zygote: ", reply.GetString("message")));
  }
  return reply;
}

absl::StatusOr<Frame> ZygoteClient::StaticCheck(const std::string& source, bool require_triton,
                                                int64_t max_bytes, absl::Duration timeout) {
  Frame request = Frame::Of("static_check");
  request.Set("source", source).Set("require_triton", require_triton).Set("max_bytes", max_bytes);
  return Call(std::move(request), -1, timeout);
}

absl::StatusOr<int> ZygoteClient::Spawn(const google::protobuf::Struct& config, int child_fd,
                                        absl::Duration timeout) {
  Frame request = Frame::Of("spawn");
  google::protobuf::Value value;
  *value.mutable_struct_value() = config;
  request.Set("config", std::move(value));
  KF_ASSIGN_OR_RETURN(Frame reply, Call(std::move(request), child_fd, timeout));
  return static_cast<int>(reply.GetNumber("pid"));
}

absl::StatusOr<Frame> ZygoteClient::FillTritonCache(const std::string& dir,
                                                    const std::string& device,
                                                    absl::Duration timeout) {
  Frame request = Frame::Of("fill_cache");
  request.Set("dir", dir).Set("device", device).Set("timeout_s", absl::ToDoubleSeconds(timeout));
  // The zygote's own deadline comes first; this one covers a stuck zygote.
  return Call(std::move(request), -1, timeout + absl::Seconds(10));
}

absl::StatusOr<int> ZygoteClient::BuildLaunchers(const std::string& dir,
                                                 const std::string& device,
                                                 google::protobuf::Value signatures,
                                                 absl::Duration timeout) {
  Frame request = Frame::Of("build_launchers");
  request.Set("dir", dir).Set("device", device).Set("signatures", std::move(signatures));
  KF_ASSIGN_OR_RETURN(Frame reply, Call(std::move(request), -1, timeout));
  return static_cast<int>(reply.GetNumber("pid"));
}

std::optional<ExitInfo> ZygoteClient::WaitExit(int pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (!exits_.contains(pid) && !dead_) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) break;
  }
  auto it = exits_.find(pid);
  if (it == exits_.end()) return std::nullopt;
  ExitInfo info = it->second;
  exits_.erase(it);
  return info;
}

}  // namespace kforge
