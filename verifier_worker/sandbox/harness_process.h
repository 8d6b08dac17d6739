// Starting the Python harness processes (zygote, reference server) with a
// private channel on fd 3, and the settings they share.
#ifndef KFORGE_VERIFIER_WORKER_SANDBOX_HARNESS_PROCESS_H_
#define KFORGE_VERIFIER_WORKER_SANDBOX_HARNESS_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/process/child_process.h"
#include "verifier_worker/sandbox/frame_channel.h"

namespace kforge {

struct HarnessSetup {
  std::string python;       // interpreter with torch
  std::string harness_dir;  // folder holding the kforge_harness package
  std::string log_dir;      // harness processes' stdout/stderr go here
  std::string device;       // "cpu", "cuda:0"
  // The verifier's environment variables the harness processes (and so
  // every candidate they fork) get besides HarnessEnvironment()'s
  // (VerifierWorkerConfig.harness_env).
  std::vector<std::string> pass_env;
};

// What the harness processes need of the verifier's environment: the
// search paths, the locale, and the settings of CUDA, Triton, torch and the
// math libraries. Nothing else passes: a candidate forked from them could
// read any variable (a red team read all 46 of the verifier's names through
// str.format's field lookups), and a deployment's credentials live there.
const std::vector<std::string>& HarnessEnvironment();

struct HarnessProcess {
  std::unique_ptr<ChildProcess> process;
  FrameChannel channel;
};

// Runs `python -m <module> 3` with the channel's other end as fd 3.
absl::StatusOr<HarnessProcess> StartHarnessProcess(const HarnessSetup& setup,
                                                   const std::string& module);

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_SANDBOX_HARNESS_PROCESS_H_
