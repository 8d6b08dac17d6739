#include "verifier_worker/stream_credits.h"

#include <algorithm>
#include <utility>

namespace kforge {

void StreamCredits::AddGrant(std::map<int64_t, Pending>& grants, int64_t id,
                             const Stream& stream, int credits) {
  Pending& pending = grants[id];
  pending.grant = stream.grant;
  pending.credits += credits;
}

std::map<int64_t, StreamCredits::Pending> StreamCredits::ShareOut() {
  std::map<int64_t, Pending> grants;
  if (streams_.empty()) return grants;
  const int streams = static_cast<int>(streams_.size());
  const int share = std::max(1, (places_ + streams - 1) / streams);
  // What the streams below their share lack beyond the free places is
  // taken back from the unspent credits of streams above theirs, most
  // over first. Admitted requests are never taken back.
  int lacking = used_ - places_;
  for (const auto& [id, stream] : streams_) lacking += std::max(0, share - stream.owned());
  while (lacking > 0) {
    Stream* richest = nullptr;
    int64_t richest_id = 0;
    for (auto& [id, stream] : streams_) {
      if (stream.spare(share) > 0 &&
          (richest == nullptr || stream.spare(share) > richest->spare(share))) {
        richest = &stream;
        richest_id = id;
      }
    }
    if (richest == nullptr) break;
    --richest->held;
    --used_;
    --lacking;
    AddGrant(grants, richest_id, *richest, -1);
  }
  while (used_ < places_) {
    // The stream furthest below its share; ties go round-robin, starting
    // after the stream served last, so streams without a place take turns.
    Stream* neediest = nullptr;
    int64_t neediest_id = 0;
    auto consider = [&](int64_t id, Stream& stream) {
      if (stream.owned() >= share) return;
      if (neediest == nullptr || stream.owned() < neediest->owned()) {
        neediest = &stream;
        neediest_id = id;
      }
    };
    const auto start = streams_.upper_bound(last_served_);
    for (auto it = start; it != streams_.end(); ++it) consider(it->first, it->second);
    for (auto it = streams_.begin(); it != start; ++it) consider(it->first, it->second);
    if (neediest == nullptr) break;  // every stream has its share
    last_served_ = neediest_id;
    ++neediest->held;
    ++used_;
    AddGrant(grants, neediest_id, *neediest, +1);
  }
  return grants;
}

void StreamCredits::Hand(std::map<int64_t, Pending> grants) {
  for (auto& [id, pending] : grants) {
    if (pending.credits != 0) pending.grant(pending.credits);
  }
}

int64_t StreamCredits::Open(Grant grant) {
  std::map<int64_t, Pending> grants;
  int64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    id = next_id_++;
    streams_[id].grant = std::move(grant);
    grants = ShareOut();
  }
  Hand(std::move(grants));
  return id;
}

void StreamCredits::Close(int64_t stream) {
  std::map<int64_t, Pending> grants;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return;
    used_ -= it->second.held + it->second.admitted;
    streams_.erase(it);
    grants = ShareOut();
  }
  Hand(std::move(grants));
}

bool StreamCredits::Spend(int64_t stream) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.held <= 0) return false;
  --it->second.held;
  ++it->second.admitted;
  return true;
}

void StreamCredits::Finish(int64_t stream) {
  std::map<int64_t, Pending> grants;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end() || it->second.admitted <= 0) return;
    --it->second.admitted;
    --used_;
    grants = ShareOut();
  }
  Hand(std::move(grants));
}

bool StreamCredits::TakeUnary() {
  std::map<int64_t, Pending> grants;
  {
    absl::MutexLock lock(&mu_);
    if (used_ < places_) {
      ++used_;
      ++unary_;
      return true;
    }
    // Every place is held: take an unspent credit back from the stream
    // holding the most, so an idle stream does not shut unary calls out.
    auto richest = streams_.end();
    for (auto it = streams_.begin(); it != streams_.end(); ++it) {
      if (it->second.held > 0 &&
          (richest == streams_.end() || it->second.held > richest->second.held)) {
        richest = it;
      }
    }
    if (richest == streams_.end()) return false;  // every place is working
    --richest->second.held;
    ++unary_;
    AddGrant(grants, richest->first, richest->second, -1);
  }
  Hand(std::move(grants));
  return true;
}

void StreamCredits::FinishUnary() {
  std::map<int64_t, Pending> grants;
  {
    absl::MutexLock lock(&mu_);
    if (unary_ <= 0) return;
    --unary_;
    --used_;
    grants = ShareOut();
  }
  Hand(std::move(grants));
}

StreamCredits::Stats StreamCredits::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s{.places = places_, .streams = static_cast<int>(streams_.size()), .unary = unary_};
  for (const auto& [id, stream] : streams_) {
    s.held += stream.held;
    s.admitted += stream.admitted;
  }
  return s;
}

}  // namespace kforge
