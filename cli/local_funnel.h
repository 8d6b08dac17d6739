// A verifier funnel inside the CLI process (its own zygote and reference
// server in a scratch folder, removed on destruction), for `kforge verify`
// and `kforge eval` without a verifier service.
#ifndef KFORGE_CLI_LOCAL_FUNNEL_H_
#define KFORGE_CLI_LOCAL_FUNNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "verifier_worker/funnel/funnel.h"

namespace kforge {

class LocalFunnel {
 public:
  // python: "" finds an interpreter with torch; device: "cpu" or "cuda:N";
  // spare_sandboxes: candidate processes kept ready (FunnelConfig).
  static absl::StatusOr<std::unique_ptr<LocalFunnel>> Start(const std::string& python,
                                                            const std::string& device,
                                                            int max_concurrent,
                                                            int spare_sandboxes);
  ~LocalFunnel();
  Funnel& funnel() { return *funnel_; }

 private:
  LocalFunnel(std::string work_dir, std::unique_ptr<Funnel> funnel)
      : work_dir_(std::move(work_dir)), funnel_(std::move(funnel)) {}
  std::string work_dir_;
  std::unique_ptr<Funnel> funnel_;
};

}  // namespace kforge

#endif  // KFORGE_CLI_LOCAL_FUNNEL_H_
