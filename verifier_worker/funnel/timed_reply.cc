#include "verifier_worker/funnel/timed_reply.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kforge {

std::string ImpossibleTime(const Frame& reply) {
  for (const char* key : {"event_ms", "host_ms", "fresh_ms", "fresh_cpu_ms"}) {
    const google::protobuf::Value* field = reply.Get(key);
    // None: no events on the CPU.
    if (field == nullptr || field->kind_case() == google::protobuf::Value::kNullValue) continue;
    // A list of times, or one.
    google::protobuf::ListValue one;
    if (field->kind_case() != google::protobuf::Value::kListValue) *one.add_values() = *field;
    const google::protobuf::ListValue& list =
        field->kind_case() == google::protobuf::Value::kListValue ? field->list_value() : one;
    for (const auto& v : list.values()) {
      const bool number = v.kind_case() == google::protobuf::Value::kNumberValue;
      if (!number || !std::isfinite(v.number_value()) || v.number_value() < 0) {
        return absl::StrCat(key, " holds ",
                            number ? absl::StrFormat("%g ms", v.number_value()) : "a non-number",
                            ", a time no clock gives");
      }
    }
  }
  return "";
}

std::string FreshCallsNotAsSent(const Frame& reply, size_t sent, bool cpu) {
  auto count = [&](const char* key) {
    const google::protobuf::Value* list = reply.Get(key);
    return list == nullptr ? 0 : list->list_value().values_size();
  };
  const int returned = count("fresh_sets");
  const int timed = count("fresh_ms");
  if (returned != static_cast<int>(sent) || timed != returned) {
    return absl::StrCat("the timed runs' reply holds ", returned, " fresh-input calls and ",
                        timed, " times of them, for the ", sent, " sent");
  }
  if (cpu && count("fresh_cpu_ms") != returned) {
    return absl::StrCat("the timed runs' reply holds ", count("fresh_cpu_ms"),
                        " CPU times of its ", returned, " fresh-input calls");
  }
  return "";
}

}  // namespace kforge
