#include "verifier_worker/stream_writer.h"

#include <pthread.h>

#include <utility>

namespace kforge {

StreamWriter::StreamWriter(Stream* stream, int max_acks)
    : stream_(stream), max_acks_(max_acks < 1 ? 1 : max_acks) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "kf-stream-w");
    Run();
  });
}

StreamWriter::~StreamWriter() { Close(); }

void StreamWriter::Ack(v1::VerifyStreamResponse message) {
  absl::MutexLock lock(&mu_);
  auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !Open() || acks_queued_ < max_acks_;
  };
  mu_.Await(absl::Condition(&room));
  if (!Open()) return;
  ++acks_queued_;
  queue_.push_back(std::move(message));
}

void StreamWriter::Send(v1::VerifyStreamResponse message) {
  absl::MutexLock lock(&mu_);
  if (Open()) queue_.push_back(std::move(message));
}

void StreamWriter::Grant(int credits) {
  absl::MutexLock lock(&mu_);
  if (!Open() || credits == 0) return;
  // Grants still waiting merge: the client needs the sum, not each one.
  if (!queue_.empty() && queue_.back().has_credit()) {
    v1::StreamCredit* queued = queue_.back().mutable_credit();
    queued->set_credits(queued->credits() + credits);
    return;
  }
  v1::VerifyStreamResponse grant;
  grant.mutable_credit()->set_credits(credits);
  queue_.push_back(std::move(grant));
}

void StreamWriter::Close() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool StreamWriter::broken() const {
  absl::MutexLock lock(&mu_);
  return broken_;
}

void StreamWriter::Run() {
  for (;;) {
    v1::VerifyStreamResponse message;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || closing_;
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty() || broken_) return;  // closing, and all written (or nobody listens)
      message = std::move(queue_.front());
      queue_.pop_front();
      if (message.has_ack()) --acks_queued_;
    }
    if (message.has_credit() && message.credit().credits() == 0) continue;
    // Without the lock: a slow client blocks only this thread.
    if (!stream_->Write(message)) {
      absl::MutexLock lock(&mu_);
      broken_ = true;
      queue_.clear();
      acks_queued_ = 0;
    }
  }
}

}  // namespace kforge
