// CandidateSession against the real zygote and harness: a candidate's
// process runs only while the verifier asks it something (stopped once each
// reply is in, resumed for the next request), so nothing it leaves running
// can load the GPU under another candidate's timing; and a reply written
// into the shared buffer the verifier offers is read only once sealed, never
// while the candidate could still change it.
#include "verifier_worker/funnel/candidate_session.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "verifier_worker/python/python_interpreter.h"
#include "verifier_worker/sandbox/harness_process.h"
#include "verifier_worker/sandbox/zygote_client.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// The fields of /proc/<pid>/stat after the name: state, parent pid, ...
// (empty if the process is gone).
std::vector<std::string> StatFields(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string stat = text.str();
  const size_t paren = stat.rfind(')');  // the name may hold spaces
  if (paren == std::string::npos || paren + 2 >= stat.size()) return {};
  return absl::StrSplit(stat.substr(paren + 2), ' ');
}

// The state letter: 'T' stopped, 'S' sleeping, ...
char ProcessState(int pid) {
  const std::vector<std::string> fields = StatFields(pid);
  return fields.empty() || fields[0].empty() ? '?' : fields[0][0];
}

class CandidateSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<PythonInfo> python = FindPythonWithTorch("", absl::Seconds(120));
    ASSERT_TRUE(python.ok()) << python.status();
    dir_ = fs::temp_directory_path() /
           absl::StrCat("kforge-session-test-", ::getpid(), "-", counter_++);
    fs::create_directories(dir_ / "candidate");
    // A credential of the verifier's, which no candidate may inherit.
    ::setenv("KFORGE_TEST_CREDENTIAL", "hunter2", 1);
    absl::StatusOr<std::unique_ptr<ZygoteClient>> zygote = ZygoteClient::Start(
        {.python = python->path,
         .harness_dir =
             (fs::path(KFORGE_TEST_BIN_DIR).parent_path() / "share/kforge/harness").string(),
         .log_dir = (dir_ / "logs").string(),
         .device = "cpu"},
        absl::Seconds(120));
    ASSERT_TRUE(zygote.ok()) << zygote.status();
    Frame config;
    config.Set("work_dir", (dir_ / "candidate").string())
        .Set("device", "cpu")
        .Set("max_open_files", 256)
        .Set("max_file_bytes", int64_t{1} << 26)
        .Set("max_processes", 64)
        .Set("memory_bytes", int64_t{1} << 33)
        .Set("threads", 1)
        .Set("warm_up", false);
    absl::StatusOr<std::unique_ptr<CandidateSession>> session = CandidateSession::Start(
        std::shared_ptr<ZygoteClient>(*std::move(zygote)), config.header, absl::Seconds(60));
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
  }
  void TearDown() override {
    session_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A compile request for `source` (its ModelNew takes no arguments) on
  // four floats, with a shared buffer offered for the reply.
  static Frame CompileWithReplyBuffer(const std::string& source) {
    Frame compile = Frame::Of("compile");
    google::protobuf::Value no_init_inputs;
    no_init_inputs.mutable_list_value();
    compile.Set("source", source)
        .Set("init_inputs", no_init_inputs)
        .Set("init_seed", int64_t{1})
        .Set("set", "tiny")
        .Set("dtype", "")
        .Set("attribute", false);
    const float x[4] = {-1.5f, 2.0f, -0.25f, 3.0f};
    compile.AddTensor("tiny/in0", absl::string_view(reinterpret_cast<const char*>(x), sizeof(x)),
                      "float32", {4});
    // The output and the input as it is after: 32 bytes.
    absl::StatusOr<SharedMemory> buffer = SharedMemory::Create("test-reply", 32);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    compile.OfferReplyBuffer(std::make_shared<SharedMemory>(*std::move(buffer)));
    return compile;
  }

  static inline int counter_ = 0;
  fs::path dir_;
  std::unique_ptr<CandidateSession> session_;
};

TEST_F(CandidateSessionTest, TheCandidateIsStoppedBetweenRequestsAndResumedForEach) {
  const int pid = session_->pid();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Frame> pong = session_->Request(Frame::Of("ping"), absl::Seconds(30));
    ASSERT_TRUE(pong.ok()) << pong.status();
    EXPECT_EQ(pong->type(), "pong");
    // The stop is a signal: give the kernel a moment to deliver it.
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (ProcessState(pid) != 'T' && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    EXPECT_EQ(ProcessState(pid), 'T') << "request " << i;
  }
  session_.reset();  // killed and reaped, stopped or not
  EXPECT_NE(ProcessState(pid), 'T');
}

TEST_F(CandidateSessionTest, TheCandidateHasNoneOfTheVerifiersEnvironmentButWhatTheHarnessNeeds) {
  // Its environment block, as the kernel shows it (what the zygote was
  // started with, whatever the process changed since).
  std::ifstream in(absl::StrCat("/proc/", session_->pid(), "/environ"), std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  std::set<std::string> names;
  for (absl::string_view entry : absl::StrSplit(text.str(), '\0', absl::SkipEmpty())) {
    names.insert(std::string(entry.substr(0, entry.find('='))));
  }
  ASSERT_FALSE(names.empty());
  EXPECT_FALSE(names.contains("KFORGE_TEST_CREDENTIAL"));
  EXPECT_TRUE(names.contains("PATH"));
  EXPECT_TRUE(names.contains("PYTHONPATH")) << "the harness's own";
  for (const std::string& name : names) {
    bool allowed = name.rfind("PYTHON", 0) == 0;
    for (const std::string& pattern : HarnessEnvironment()) {
      allowed |= pattern.back() == '*' ? name.rfind(pattern.substr(0, pattern.size() - 1), 0) == 0
                                       : name == pattern;
    }
    EXPECT_TRUE(allowed) << name;
  }
}

constexpr char kRelu[] = R"(
import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.0)
)";

TEST_F(CandidateSessionTest, AReplyInTheOfferedBufferIsSealedBeforeItIsRead) {
  absl::StatusOr<Frame> reply = session_->Request(CompileWithReplyBuffer(kRelu), absl::Seconds(60));
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->type(), "compiled") << reply->GetString("message");
  ASSERT_TRUE(reply->GetBool("payload_in_reply_buffer"));
  ASSERT_NE(reply->shared_payload, nullptr);
  EXPECT_TRUE(reply->shared_payload->sealed());
  absl::StatusOr<std::vector<TensorEntry>> tensors = reply->Tensors();
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 2u);
  float out[4];
  ASSERT_EQ((*tensors)[0].name, "run0/out0");
  std::memcpy(out, reply->TensorBytes((*tensors)[0]).data(), sizeof(out));
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 2.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 3.0f);
}

// Burns 300 ms of CPU time in its constructor (by its own CPU clock: on a
// busy host that takes longer).
constexpr char kBurnsCpuTime[] = R"(
import time
import torch

class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        start = time.process_time()
        while time.process_time() - start < 0.3:
            pass
    def forward(self, x):
        return torch.clamp(x, min=0.0)
)";

TEST_F(CandidateSessionTest, ItsCpuTimeIsReadFromOutsideAndStandsStillBetweenRequests) {
  absl::StatusOr<absl::Duration> before = session_->CpuTime();
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<Frame> reply =
      session_->Request(CompileWithReplyBuffer(kBurnsCpuTime), absl::Seconds(60));
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->type(), "compiled") << reply->header.DebugString();
  // The stop is a signal: once the process shows it, its clock is still.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (ProcessState(session_->pid()) != 'T' && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  absl::StatusOr<absl::Duration> after = session_->CpuTime();
  ASSERT_TRUE(after.ok()) << after.status();
  // The constructor's 300 ms are in the process's count (every thread's:
  // SerialVerifierTest has work on torch's inter-op thread seen by it).
  EXPECT_GE(*after - *before, absl::Milliseconds(250));
  absl::SleepFor(absl::Milliseconds(100));
  absl::StatusOr<absl::Duration> later = session_->CpuTime();
  ASSERT_TRUE(later.ok()) << later.status();
  // Stopped: a thread shown stopped may still be switching out, for
  // microseconds, not the 100 ms slept.
  EXPECT_LT(*later - *after, absl::Milliseconds(1));
}

// The static check refuses this source (os, mmap, a private torch helper);
// the session, which never relies on it, must hold on its own. It maps every
// descriptor it has shared and writable: the sealed input buffers refuse,
// the reply buffer the verifier offered does not (it may not find the
// harness's objects: the audit hook refuses gc to the candidate). Its
// modules come through a torch function that imports by name (the harness
// refuses the candidate's own imports of them): whatever reached them.
constexpr char kHoldsTheReplyBuffer[] = R"(
import torch

mmap = torch._utils._import_dotted_name("mmap")
os = torch._utils._import_dotted_name("os")

_held = []

class ModelNew(torch.nn.Module):
    def forward(self, x):
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            try:
                size = os.fstat(fd).st_size
                if size > 0:
                    _held.append(mmap.mmap(fd, size, flags=mmap.MAP_SHARED,
                                           prot=mmap.PROT_READ | mmap.PROT_WRITE))
            except (OSError, ValueError):
                pass
        return torch.clamp(x, min=0.0)
)";

TEST_F(CandidateSessionTest, AReplyBufferTheCandidateKeepsMappedWritableIsNeverRead) {
  absl::StatusOr<Frame> reply =
      session_->Request(CompileWithReplyBuffer(kHoldsTheReplyBuffer), absl::Seconds(60));
  ASSERT_FALSE(reply.ok()) << "read a buffer the candidate can still write: "
                           << reply->GetString("message");
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable) << reply.status();
  EXPECT_NE(reply.status().message().find("could not be read safely"), std::string::npos)
      << reply.status();
  EXPECT_EQ(session_->kill_reason(), "reply buffer not released");
}

// pid's open descriptors: number -> what /proc says it is ("pipe:[118]",
// "socket:[7]", a path): the same pipe or socket reads the same in every
// process that holds it.
std::map<int, std::string> Descriptors(int pid) {
  std::map<int, std::string> out;
  std::error_code ec;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), ec)) {
    int fd = -1;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &fd)) continue;
    std::error_code link_ec;
    const fs::path target = fs::read_symlink(entry.path(), link_ec);
    if (!link_ec) out[fd] = target.string();
  }
  return out;
}

int ParentPid(int pid) {
  const std::vector<std::string> fields = StatFields(pid);
  int parent = -1;
  if (fields.size() > 1) (void)absl::SimpleAtoi(fields[1], &parent);
  return parent;
}

TEST_F(CandidateSessionTest, TheCandidateSharesNoDescriptorWithTheZygoteButItsStandardStreams) {
  // A request first, so that the candidate is all set up (a reply buffer
  // came and went, the harness is loaded).
  absl::StatusOr<Frame> reply = session_->Request(CompileWithReplyBuffer(kRelu), absl::Seconds(60));
  ASSERT_TRUE(reply.ok()) << reply.status();
  const int candidate = session_->pid();
  const int zygote = ParentPid(candidate);
  ASSERT_GT(zygote, 1);
  const std::map<int, std::string> candidates = Descriptors(candidate);
  const std::map<int, std::string> zygotes = Descriptors(zygote);
  ASSERT_FALSE(candidates.empty()) << "cannot read /proc/" << candidate << "/fd";
  ASSERT_FALSE(zygotes.empty()) << "cannot read /proc/" << zygote << "/fd";
  // Pipes, sockets and event descriptors the candidate made itself (torch
  // and its profiler make some) are its own; one it shares with the zygote
  // reached it through fork: the zygote's control socket or its signal
  // pipe, or anything the verifier's process left open when it started the
  // zygote.
  std::set<std::string> shared_kinds;
  for (const auto& [fd, target] : zygotes) {
    if (fd > 2 && target.find(":[") != std::string::npos) shared_kinds.insert(target);
  }
  for (const auto& [fd, target] : candidates) {
    if (fd <= 2) continue;
    EXPECT_FALSE(shared_kinds.contains(target))
        << "the candidate's descriptor " << fd << " is the zygote's " << target;
  }
  // Nor a file or device past the standard streams that the zygote holds
  // too (the /dev/null the spawner opened for stdin had reached both).
  for (const auto& [fd, target] : candidates) {
    if (fd <= 2 || target.find(":[") != std::string::npos) continue;
    for (const auto& [zygote_fd, zygote_target] : zygotes) {
      EXPECT_FALSE(zygote_fd == fd && zygote_target == target)
          << "descriptor " << fd << " (" << target << ") is inherited from the zygote";
    }
  }
}

}  // namespace
}  // namespace kforge
