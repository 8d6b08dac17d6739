// Which Triton launcher signatures candidates needed, for a trusted child of
// the zygote to build ahead into the base Triton cache (harness
// launchers.py). A reply's "launchers" list is the candidate's word: only
// lists of known argument type names are kept, each once, up to a bound
// over the verifier's life.
//
//   LauncherHarvest harvest(/*max_signatures=*/256);
//   harvest.Offer(reply.Get("launchers"));        // after each reply
//   google::protobuf::Value todo = harvest.TakePending();  // to build now
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_LAUNCHER_HARVEST_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_LAUNCHER_HARVEST_H_

#include <set>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>

#include "absl/synchronization/mutex.h"

namespace kforge {

class LauncherHarvest {
 public:
  explicit LauncherHarvest(int max_signatures) : max_signatures_(max_signatures) {}

  // New signatures kept from one reply at most: one candidate cannot spend
  // the whole bound.
  static constexpr int kPerOffer = 8;

  // Whether `signature` is 1 to 64 known argument type names ("*fp32",
  // "i32", "constexpr"...), as Triton writes a kernel's signature.
  static bool Valid(const std::vector<std::string>& signature);

  // Keeps the valid signatures of `launchers` (a list of lists of strings,
  // or null) not seen before, at most kPerOffer of them, while fewer than
  // the bound were kept.
  void Offer(const google::protobuf::Value* launchers);
  // The signatures kept since the last call, as a list of lists.
  google::protobuf::Value TakePending();
  int kept() const;

 private:
  const int max_signatures_;
  mutable absl::Mutex mu_;
  std::set<std::vector<std::string>> seen_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<std::string>> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_LAUNCHER_HARVEST_H_
