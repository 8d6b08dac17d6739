// Files that tests build on: a checkpoint folder that passes the learner's
// submission check, a small KernelBench-layout task folder, and paths to
// the binaries under test and to KernelBench's problems.
#ifndef KFORGE_TESTS_SUPPORT_FIXTURES_H_
#define KFORGE_TESTS_SUPPORT_FIXTURES_H_

#include <string>

#include "kforge/v1/job.pb.h"

namespace kforge::testing {

// build/bin/<name>.
std::string BinaryPath(const std::string& name);

// The KernelBench problems where FindKernelBenchDir finds them
// (common/paths/kernelbench_dir.h); "" when absent, and then, once per test
// binary, a note on stderr of where it looked and how to get them.
std::string SharedKernelBenchDir();

// The skip message of a test that needs them.
inline constexpr const char* kNoKernelBench =
    "needs KernelBench's problems (how to get them: the [kforge tests] note above)";

void WriteFile(const std::string& path, const std::string& contents);

// config.json (with `architecture`), tokenizer.json and model.safetensors
// (a valid, empty safetensors file): what SubmitJob's model check reads. It
// is not a loadable model.
void WriteCheckpointSkeleton(const std::string& dir,
                             const std::string& architecture = "Qwen2ForCausalLM");

// level1/1_Relu.py, level1/2_Scale.py (with a solution) and level2/1_ReluScale.py.
void WriteTaskFolder(const std::string& dir);

// A spec that passes every check, pointing at the two folders above.
kforge::v1::JobSpec ValidJobSpec(const std::string& model_dir, const std::string& tasks_dir);

}  // namespace kforge::testing

#endif  // KFORGE_TESTS_SUPPORT_FIXTURES_H_
