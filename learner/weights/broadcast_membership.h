// Who takes part in the learner's NCCL weight broadcast: the rollout workers
// that long-poll SyncBroadcast with the learner's parameter layout, and are
// alive by that poll. Bookkeeping over explicit times, so tests drive it
// without clocks; WeightBroadcaster holds it under its lock.
//
//   membership.PollStarted("w1", "bf16:3087467520", "gpu-uuid", now);   // each SyncBroadcast call
//   membership.PollEnded("w1", now);
//   membership.Suspect(group_members, now);   // the group failed: out until they poll again
//   membership.Failed("w1", now);             // it said its join failed: backed off
//   std::vector<std::string> members = membership.Eligible(layout, learner_gpu, now);
//
// A worker counts as alive while one of its polls is open or for
// member_timeout after its last poll. A worker whose poll was cancelled (the
// process went away) or that the registry expired is removed at once. After
// a failed join or broadcast every member of that group is suspect: it is
// left out of the next group until it polls again, so a dead member (which
// never polls again) is not waited for twice, and a live one rejoins after
// its own timeout. A worker that reports a failed join is left out
// for a back-off that doubles with each failure in a row (until it is part
// of a group that forms), so one that can never join costs the learner one
// form timeout now and then, not one per update. NCCL needs one GPU per rank: a worker on the learner's GPU
// is never eligible, and of workers sharing a GPU only the first by id is.
// Not thread-safe.
#ifndef KFORGE_LEARNER_WEIGHTS_BROADCAST_MEMBERSHIP_H_
#define KFORGE_LEARNER_WEIGHTS_BROADCAST_MEMBERSHIP_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace kforge {

class BroadcastMembership {
 public:
  BroadcastMembership(absl::Duration member_timeout, absl::Duration backoff,
                      absl::Duration max_backoff)
      : member_timeout_(member_timeout), backoff_(backoff), max_backoff_(max_backoff) {}

  void PollStarted(const std::string& worker, const std::string& layout,
                   const std::string& device_uuid, absl::Time now);
  void PollEnded(const std::string& worker, absl::Time now);
  void Remove(const std::string& worker);
  void Suspect(const std::vector<std::string>& workers, absl::Time now);
  void Failed(const std::string& worker, absl::Time now);
  // The workers were in a group that formed: their failure counts restart.
  void Formed(const std::vector<std::string>& workers);

  // The workers, by id in order, that a group formed now would have.
  std::vector<std::string> Eligible(const std::string& layout, const std::string& learner_device,
                                    absl::Time now) const;

 private:
  struct Member {
    std::string layout;
    std::string device_uuid;
    int open_polls = 0;
    absl::Time last_seen = absl::InfinitePast();
    absl::Time suspect_since = absl::InfinitePast();
    int failures = 0;
    absl::Time out_until = absl::InfinitePast();
  };

  const absl::Duration member_timeout_;
  const absl::Duration backoff_;
  const absl::Duration max_backoff_;
  std::map<std::string, Member> members_;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_WEIGHTS_BROADCAST_MEMBERSHIP_H_
