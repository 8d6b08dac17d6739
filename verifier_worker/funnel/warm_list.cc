#include "verifier_worker/funnel/warm_list.h"

#include <set>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kforge {

std::string CompileSignature(const ReferenceSet& set) {
  std::string signature;
  (void)google::protobuf::util::MessageToJsonString(set.init_inputs, &signature);
  absl::StrAppend(&signature, "|", set.spec.dtype);
  for (const TensorEntry& e : set.inputs) {
    absl::StrAppend(&signature, "|", e.dtype, "[", absl::StrJoin(e.shape, ","), "]");
  }
  absl::StrAppend(&signature, "|", set.scalars.list_value().values_size());
  return signature;
}

google::protobuf::Value WarmList(const ReferenceEpoch& epoch, const ReferenceSet& tiny) {
  google::protobuf::Value list;
  list.mutable_list_value();
  std::set<std::string> seen = {CompileSignature(tiny)};
  if (auto own = epoch.sets.find("task_inputs"); own != epoch.sets.end() && own->second.ok) {
    seen.insert(CompileSignature(own->second));
  }
  for (const InputSetSpec& spec : epoch.plan.sets) {
    auto it = epoch.sets.find(spec.name);
    if (it == epoch.sets.end() || !it->second.ok) continue;
    const ReferenceSet& set = it->second;
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
