#include "verifier_worker/funnel/launcher_harvest.h"

#include <algorithm>
#include <array>

#include "absl/strings/strip.h"
#include "absl/strings/string_view.h"

namespace kforge {
namespace {

// The same names as the harness's launchers.py.
constexpr std::array<absl::string_view, 17> kElements = {
    "fp8e4nv", "fp8e5", "fp8e4b15", "fp16", "bf16", "fp32", "fp64", "i1", "i8",
    "i16",     "i32",   "i64",      "u1",   "u8",   "u16",  "u32",  "u64"};
constexpr std::array<absl::string_view, 6> kScalars = {"i1",  "i32",  "i64",
                                                       "u64", "fp32", "constexpr"};
constexpr size_t kMaxArgs = 64;

bool KnownType(absl::string_view type) {
  if (absl::ConsumePrefix(&type, "*")) {
    absl::ConsumePrefix(&type, "k");  // a pointer to constant data
    return std::find(kElements.begin(), kElements.end(), type) != kElements.end();
  }
  return std::find(kScalars.begin(), kScalars.end(), type) != kScalars.end();
}

}  // namespace

bool LauncherHarvest::Valid(const std::vector<std::string>& signature) {
  return !signature.empty() && signature.size() <= kMaxArgs &&
         std::all_of(signature.begin(), signature.end(), KnownType);
}

void LauncherHarvest::Offer(const google::protobuf::Value* launchers) {
  if (launchers == nullptr || !launchers->has_list_value()) return;
  absl::MutexLock lock(&mu_);
  int kept = 0;
  for (const google::protobuf::Value& entry : launchers->list_value().values()) {
    if (static_cast<int>(seen_.size()) >= max_signatures_ || kept >= kPerOffer) return;
    if (!entry.has_list_value()) continue;
    std::vector<std::string> signature;
    bool strings = true;
    for (const google::protobuf::Value& type : entry.list_value().values()) {
      strings = strings && type.has_string_value();
      if (strings) signature.push_back(type.string_value());
    }
    if (!strings || !Valid(signature) || !seen_.insert(signature).second) continue;
    pending_.push_back(std::move(signature));
    ++kept;
  }
}

google::protobuf::Value LauncherHarvest::TakePending() {
  google::protobuf::Value out;
  out.mutable_list_value();
  absl::MutexLock lock(&mu_);
  for (const std::vector<std::string>& signature : pending_) {
    google::protobuf::ListValue* types = out.mutable_list_value()->add_values()->mutable_list_value();
    for (const std::string& type : signature) types->add_values()->set_string_value(type);
  }
  pending_.clear();
  return out;
}

int LauncherHarvest::kept() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(seen_.size());
}

}  // namespace kforge
