#include "verifier_worker/sandbox/candidate_cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// How long removal waits for killed processes to leave a cgroup; they leave
// as soon as the kernel has torn them down, well before their parent reaps.
constexpr int kRemoveAttempts = 100;
constexpr auto kRemoveBackoff = std::chrono::milliseconds(10);

std::string ReadSmallFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes `value` in one write(2), as cgroup files want.
absl::Status WriteControl(const fs::path& path, absl::string_view value) {
  std::FILE* file = std::fopen(path.c_str(), "we");
  if (file == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open ", path.string(), ": ", std::strerror(errno)));
  }
  const size_t written = std::fwrite(value.data(), 1, value.size(), file);
  const int flush_error = std::fflush(file) == 0 ? 0 : errno;
  std::fclose(file);
  if (written != value.size() || flush_error != 0) {
    const int err = flush_error != 0 ? flush_error : EIO;
    absl::Status status = absl::FailedPreconditionError(absl::StrCat(
        "cannot write \"", value, "\" to ", path.string(), ": ", std::strerror(err)));
    if (err == EBUSY) return absl::UnavailableError(status.message());
    return status;
  }
  return absl::OkStatus();
}

// The value of `key` in a flat-keyed cgroup file ("oom_kill 3\n..."); 0 when
// absent.
int64_t KeyedValue(const fs::path& path, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(ReadSmallFile(path), '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t value = 0;
    if (parts.size() == 2 && parts[0] == key && absl::SimpleAtoi(parts[1], &value)) return value;
  }
  return 0;
}

std::vector<pid_t> Members(const fs::path& dir) {
  std::vector<pid_t> pids;
  for (absl::string_view line : absl::StrSplit(ReadSmallFile(dir / "cgroup.procs"), '\n')) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
  }
  return pids;
}

absl::Status MakeDir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create cgroup ", dir.string(), ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Removes an empty cgroup folder, waiting for dying members to leave.
void RemoveDir(const fs::path& dir) {
  for (int attempt = 0; attempt < kRemoveAttempts; ++attempt) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    if (errno != EBUSY) return;
    for (pid_t pid : Members(dir)) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(kRemoveBackoff);
  }
}

// Where this process sits in each hierarchy, from /proc/self/cgroup and
// /proc/self/mounts.
struct Hierarchies {
  fs::path unified;  // "" when there is no v2 hierarchy with controllers
  fs::path memory;   // v1
  fs::path pids;     // v1
};

absl::StatusOr<Hierarchies> FindHierarchies() {
  std::map<std::string, fs::path> own_path;  // "" (v2), "memory", "pids" -> path
  for (absl::string_view line : absl::StrSplit(ReadSmallFile("/proc/self/cgroup"), '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    for (absl::string_view controller : absl::StrSplit(parts[1], ',')) {
      own_path[std::string(controller)] = fs::path(std::string(absl::StripPrefix(parts[2], "/")));
    }
  }
  Hierarchies found;
  std::string unified_note;  // why a v2 hierarchy does not serve
  for (absl::string_view line : absl::StrSplit(ReadSmallFile("/proc/self/mounts"), '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.size() < 4) continue;
    const fs::path mount{std::string(fields[1])};
    if (fields[2] == "cgroup2" && own_path.contains("")) {
      const fs::path dir = mount / own_path[""];
      const std::string controllers = ReadSmallFile(dir / "cgroup.controllers");
      if (controllers.find("memory") != std::string::npos &&
          controllers.find("pids") != std::string::npos) {
        found.unified = dir;
      } else {
        unified_note = absl::StrCat("; cgroup v2 at ", dir.string(), " offers the controllers \"",
                                    absl::StripAsciiWhitespace(controllers),
                                    "\": memory and pids are not delegated to it");
      }
    } else if (fields[2] == "cgroup") {
      for (absl::string_view option : absl::StrSplit(fields[3], ',')) {
        if ((option == "memory" || option == "pids") && own_path.contains(std::string(option))) {
          (option == "memory" ? found.memory : found.pids) = mount / own_path[std::string(option)];
        }
      }
    }
  }
  if (found.unified.empty() && (found.memory.empty() || found.pids.empty())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no cgroup hierarchy with the memory and pids controllers serves this process",
        unified_note));
  }
  return found;
}

// v2: enables memory and pids for the children of `base`. A cgroup that
// holds processes cannot delegate controllers (the no-internal-process
// rule), so its processes move to a leaf first.
absl::Status DelegateControllers(const fs::path& base, const std::string& service_leaf) {
  absl::Status enabled = WriteControl(base / "cgroup.subtree_control", "+memory +pids");
  if (enabled.ok() || !absl::IsUnavailable(enabled)) return enabled;
  const fs::path leaf = base / service_leaf;
  KF_RETURN_IF_ERROR(MakeDir(leaf));
  for (pid_t pid : Members(base)) {
    (void)WriteControl(leaf / "cgroup.procs", absl::StrCat(pid));  // gone already: fine
  }
  return WriteControl(base / "cgroup.subtree_control", "+memory +pids");
}

}  // namespace

CandidateCgroup::CandidateCgroup(fs::path memory_dir, fs::path pids_dir, bool unified)
    : memory_dir_(std::move(memory_dir)), pids_dir_(std::move(pids_dir)), unified_(unified) {
  if (unified_) {
    procs_files_["memory+pids"] = (memory_dir_ / "cgroup.procs").string();
  } else {
    procs_files_["memory"] = (memory_dir_ / "cgroup.procs").string();
    procs_files_["pids"] = (pids_dir_ / "cgroup.procs").string();
  }
}

CandidateCgroup::~CandidateCgroup() {
  KillAll();
  RemoveDir(memory_dir_);
  if (!unified_) RemoveDir(pids_dir_);
}

bool CandidateCgroup::oom_killed() const {
  if (unified_) return KeyedValue(memory_dir_ / "memory.events", "oom_kill") > 0;
  const fs::path oom_control = memory_dir_ / "memory.oom_control";
  if (ReadSmallFile(oom_control).find("oom_kill ") != std::string::npos) {
    return KeyedValue(oom_control, "oom_kill") > 0;
  }
  // Older v1 kernels do not count kills; hitting the limit is the evidence.
  int64_t failures = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadSmallFile(memory_dir_ / "memory.failcnt")),
                          &failures) &&
         failures > 0;
}

bool CandidateCgroup::process_limit_hit() const {
  return KeyedValue(pids_dir_ / "pids.events", "max") > 0;
}

void CandidateCgroup::KillAll() const {
  if (unified_ && fs::exists(memory_dir_ / "cgroup.kill") &&
      WriteControl(memory_dir_ / "cgroup.kill", "1").ok()) {
    return;
  }
  for (const fs::path& dir : {memory_dir_, pids_dir_}) {
    for (pid_t pid : Members(dir)) ::kill(pid, SIGKILL);
  }
}

absl::StatusOr<std::unique_ptr<CgroupRoot>> CgroupRoot::Discover(const std::string& name) {
  KF_ASSIGN_OR_RETURN(Hierarchies found, FindHierarchies());
  if (!found.unified.empty()) {
    KF_RETURN_IF_ERROR(DelegateControllers(found.unified, name + "-service"));
    const fs::path root = found.unified / name;
    KF_RETURN_IF_ERROR(MakeDir(root));
    KF_RETURN_IF_ERROR(WriteControl(root / "cgroup.subtree_control", "+memory +pids"));
    return std::unique_ptr<CgroupRoot>(new CgroupRoot(root, root, true));
  }
  KF_RETURN_IF_ERROR(MakeDir(found.memory / name));
  KF_RETURN_IF_ERROR(MakeDir(found.pids / name));
  return std::unique_ptr<CgroupRoot>(
      new CgroupRoot(found.memory / name, found.pids / name, false));
}

CgroupRoot::~CgroupRoot() {
  RemoveDir(memory_dir_);
  if (!unified_) RemoveDir(pids_dir_);
}

absl::StatusOr<std::unique_ptr<CandidateCgroup>> CgroupRoot::Create(const std::string& name,
                                                                    int64_t memory_bytes,
                                                                    int max_processes) const {
  const fs::path memory_dir = memory_dir_ / name;
  const fs::path pids_dir = pids_dir_ / name;
  KF_RETURN_IF_ERROR(MakeDir(memory_dir));
  if (!unified_) KF_RETURN_IF_ERROR(MakeDir(pids_dir));
  // From here the destructor removes the folders whatever fails next.
  std::unique_ptr<CandidateCgroup> cgroup(new CandidateCgroup(memory_dir, pids_dir, unified_));
  const std::string memory = absl::StrCat(memory_bytes);
  if (unified_) {
    KF_RETURN_IF_ERROR(WriteControl(memory_dir / "memory.max", memory));
    (void)WriteControl(memory_dir / "memory.swap.max", "0");  // absent without swap accounting
  } else {
    KF_RETURN_IF_ERROR(WriteControl(memory_dir / "memory.limit_in_bytes", memory));
    (void)WriteControl(memory_dir / "memory.memsw.limit_in_bytes", memory);
  }
  KF_RETURN_IF_ERROR(WriteControl(pids_dir / "pids.max", absl::StrCat(max_processes)));
  return cgroup;
}

std::string CgroupRoot::Describe() const {
  if (unified_) return absl::StrCat("cgroup v2 at ", memory_dir_.string());
  return absl::StrCat("cgroup v1 memory at ", memory_dir_.string(), ", pids at ",
                      pids_dir_.string());
}

}  // namespace kforge
