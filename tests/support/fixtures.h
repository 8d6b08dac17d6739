// Files that tests build on: a checkpoint folder that passes the learner's
// submission check, a small KernelBench-layout task folder, and paths to
// the binaries under test and to ../shared/kernelbench.
#ifndef KFORGE_TESTS_SUPPORT_FIXTURES_H_
#define KFORGE_TESTS_SUPPORT_FIXTURES_H_

#include <string>

#include "kforge/v1/job.pb.h"

namespace kforge::testing {

// build/bin/<name>.
std::string BinaryPath(const std::string& name);

// $KFORGE_KERNELBENCH_DIR if set, else ../shared/kernelbench beside the
// checkout; "" when absent.
std::string SharedKernelBenchDir();

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
