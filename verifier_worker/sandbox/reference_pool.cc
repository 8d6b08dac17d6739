#include "verifier_worker/sandbox/reference_pool.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"

namespace kforge {

ReferencePool::ReferencePool(const HarnessSetup& setup, int servers) {
  for (int i = 0; i < std::max(1, servers); ++i) {
    HarnessSetup own = setup;
    own.log_dir = absl::StrCat(setup.log_dir, "/reference-", i);
    clients_.push_back(std::make_unique<ReferenceClient>(std::move(own)));
  }
}

ReferenceClient& ReferencePool::For(const std::string& task_key) {
  return *clients_[std::hash<std::string>{}(task_key) % clients_.size()];
}

}  // namespace kforge
