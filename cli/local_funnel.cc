#include "cli/local_funnel.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/server/executable_path.h"
#include "common/status_macros.h"
#include "verifier_worker/python/python_interpreter.h"

namespace kforge {

absl::StatusOr<std::unique_ptr<LocalFunnel>> LocalFunnel::Start(const std::string& python,
                                                                 const std::string& device,
                                                                 int max_concurrent,
                                                                 int spare_sandboxes) {
  KF_ASSIGN_OR_RETURN(PythonInfo interpreter, FindPythonWithTorch(python, absl::Seconds(120)));
  const std::string work =
      (std::filesystem::temp_directory_path() / absl::StrCat("kforge-cli-", ::getpid())).string();
  KF_ASSIGN_OR_RETURN(std::unique_ptr<Funnel> funnel,
                      Funnel::Create({.harness = {.python = interpreter.path,
                                                  .harness_dir = SharedDataPath("harness"),
                                                  .log_dir = work + "/logs",
                                                  .device = device},
                                      .work_dir = work + "/candidates",
                                      .max_concurrent = max_concurrent,
                                      .cache_entries = 0,
                                      .spare_sandboxes = spare_sandboxes},
                                     nullptr));
  return std::unique_ptr<LocalFunnel>(new LocalFunnel(work, std::move(funnel)));
}

LocalFunnel::~LocalFunnel() {
  funnel_.reset();  // stops the harness processes before their folder goes
  std::error_code ec;
  std::filesystem::remove_all(work_dir_, ec);
}

}  // namespace kforge
