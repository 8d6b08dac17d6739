#include "verifier_worker/funnel/warm_list.h"

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kforge {
namespace {

// Triton specialises an integer argument on being 1, on being a multiple
// of 16 and on needing 64 bits, not on its value: a size's class, not the
// size, decides whether a first call compiles again.
std::string SizeClass(int64_t n) {
  if (n == 1) return "1";
  const bool wide = n >= (int64_t{1} << 31) || n < -(int64_t{1} << 31);
  return absl::StrCat(wide ? "L" : "", n % 16 == 0 ? "16" : "n");
}

// `value` with each integral number replaced by its class.
void AppendClasses(const google::protobuf::Value& value, std::string* out) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kNumberValue: {
      const double v = value.number_value();
      const bool integral = v == std::floor(v) && std::abs(v) < 9e15;
      absl::StrAppend(out, integral ? SizeClass(static_cast<int64_t>(v)) : "f");
      return;
    }
    case google::protobuf::Value::kListValue:
      absl::StrAppend(out, "[");
      for (const auto& item : value.list_value().values()) {
        AppendClasses(item, out);
        absl::StrAppend(out, ",");
      }
      absl::StrAppend(out, "]");
      return;
    case google::protobuf::Value::kStructValue: {
      // Keys in order: a map's iteration order is not.
      std::map<std::string, const google::protobuf::Value*> fields;
      for (const auto& [key, field] : value.struct_value().fields()) fields[key] = &field;
      absl::StrAppend(out, "{");
      for (const auto& [key, field] : fields) {
        absl::StrAppend(out, key, ":");
        AppendClasses(*field, out);
        absl::StrAppend(out, ",");
      }
      absl::StrAppend(out, "}");
      return;
    }
    default: {
      std::string text;
      (void)google::protobuf::util::MessageToJsonString(value, &text);
      absl::StrAppend(out, text);
    }
  }
}

}  // namespace

std::string CompileSignature(const ReferenceSet& set) {
  std::string signature;
  AppendClasses(set.init_inputs, &signature);
  absl::StrAppend(&signature, "|", set.spec.dtype);
  for (const TensorEntry& e : set.inputs) {
    // The sizes a kernel is likely given: each dimension, the element
    // count and the strides of the contiguous layout.
    std::vector<std::string> dims, strides;
    int64_t numel = 1;
    for (auto d = e.shape.rbegin(); d != e.shape.rend(); ++d) {
      strides.push_back(SizeClass(numel));
      numel *= *d;
    }
    for (int64_t d : e.shape) dims.push_back(SizeClass(d));
    absl::StrAppend(&signature, "|", e.dtype, "[", absl::StrJoin(dims, ","), "]n",
                    SizeClass(numel), "s", absl::StrJoin(strides, ","));
  }
  absl::StrAppend(&signature, "|");
  AppendClasses(set.scalars, &signature);
  return signature;
}

std::set<std::string> RecompilingSets(const ReferenceEpoch& epoch, const ReferenceSet& tiny) {
  std::set<std::string> compiled = {CompileSignature(tiny)};
  if (auto own = epoch.sets.find("task_inputs"); own != epoch.sets.end() && own->second.ok) {
    compiled.insert(CompileSignature(own->second));
  }
  std::set<std::string> names;
  for (const auto& [name, set] : epoch.sets) {
    if (set.ok && !compiled.contains(CompileSignature(set))) names.insert(name);
  }
  return names;
}

google::protobuf::Value WarmList(const ReferenceEpoch& epoch, const ReferenceSet& tiny) {
  google::protobuf::Value list;
  list.mutable_list_value();
  const std::set<std::string> recompiling = RecompilingSets(epoch, tiny);
  std::set<std::string> seen;  // one entry per signature
  for (const InputSetSpec& spec : epoch.plan.sets) {
    if (!recompiling.contains(spec.name)) continue;  // only sets the reference ran
    const ReferenceSet& set = epoch.sets.at(spec.name);
    if (!seen.insert(CompileSignature(set)).second) continue;
    google::protobuf::Value entry;
    auto& f = *entry.mutable_struct_value()->mutable_fields();
    f["set"].set_string_value(set.spec.name);
    f["init_inputs"] = set.init_inputs;
    f["dtype"].set_string_value(set.spec.dtype);
    f["scalars"] = set.scalars;
    auto& tensors = *f["tensors"].mutable_list_value();
    for (size_t i = 0; i < set.inputs.size(); ++i) {
      google::protobuf::Value tensor;
      auto& t = *tensor.mutable_struct_value()->mutable_fields();
      t["position"].set_number_value(set.input_positions[i]);
      t["dtype"].set_string_value(set.inputs[i].dtype);
      auto& shape = *t["shape"].mutable_list_value();
      for (int64_t d : set.inputs[i].shape) shape.add_values()->set_number_value(d);
      *tensors.add_values() = std::move(tensor);
    }
    *list.mutable_list_value()->add_values() = std::move(entry);
  }
  return list;
}

}  // namespace kforge
