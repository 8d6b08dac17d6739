#include "learner/weights/broadcast_membership.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"

namespace kforge {

void BroadcastMembership::PollStarted(const std::string& worker, const std::string& layout,
                                      const std::string& device_uuid, absl::Time now) {
  Member& member = members_[worker];
  member.layout = layout;
  member.device_uuid = device_uuid;
  ++member.open_polls;
  member.last_seen = now;
}

void BroadcastMembership::PollEnded(const std::string& worker, absl::Time now) {
  auto it = members_.find(worker);
  if (it == members_.end()) return;  // removed while its poll was open
  if (it->second.open_polls > 0) --it->second.open_polls;
  it->second.last_seen = now;
}

void BroadcastMembership::Remove(const std::string& worker) { members_.erase(worker); }

void BroadcastMembership::Suspect(const std::vector<std::string>& workers, absl::Time now) {
  for (const std::string& worker : workers) {
    auto it = members_.find(worker);
    if (it != members_.end()) it->second.suspect_since = now;
  }
}

void BroadcastMembership::Failed(const std::string& worker, absl::Time now) {
  auto it = members_.find(worker);
  if (it == members_.end()) return;
  Member& member = it->second;
  absl::Duration wait = backoff_;
  for (int i = 0; i < member.failures && wait < max_backoff_; ++i) wait *= 2;
  member.out_until = now + std::min(wait, max_backoff_);
  ++member.failures;
}

void BroadcastMembership::Formed(const std::vector<std::string>& workers) {
  for (const std::string& worker : workers) {
    auto it = members_.find(worker);
    if (it != members_.end()) it->second.failures = 0;
  }
}

std::vector<std::string> BroadcastMembership::Eligible(const std::string& layout,
                                                       const std::string& learner_device,
                                                       absl::Time now) const {
  std::vector<std::string> eligible;
  absl::flat_hash_set<std::string> devices = {learner_device};
  for (const auto& [id, member] : members_) {
    if (member.layout != layout) continue;
    // Without a GPU identity it cannot be placed on a GPU of its own.
    if (member.device_uuid.empty() || devices.contains(member.device_uuid)) continue;
    if (now < member.out_until) continue;
    if (member.last_seen <= member.suspect_since) continue;
    if (member.open_polls == 0 && now - member.last_seen > member_timeout_) continue;
    eligible.push_back(id);
    devices.insert(member.device_uuid);
  }
  return eligible;
}

}  // namespace kforge
