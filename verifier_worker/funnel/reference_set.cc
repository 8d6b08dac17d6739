#include "verifier_worker/funnel/reference_set.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "verifier_worker/funnel/tensor_compare.h"

namespace kforge {
namespace {

using kforge::v1::HackFlag;

absl::StatusOr<TensorView> View(const TensorEntry& entry, const Frame& frame) {
  KF_ASSIGN_OR_RETURN(DType dtype, ParseDType(entry.dtype));
  return TensorView{dtype, entry.shape, frame.TensorBytes(entry)};
}

std::map<std::string, TensorEntry> ByName(const Frame& frame) {
  std::map<std::string, TensorEntry> out;
  absl::StatusOr<std::vector<TensorEntry>> entries = frame.Tensors();
  if (!entries.ok()) return out;
  for (TensorEntry& e : *entries) out[e.name] = std::move(e);
  return out;
}

// Compares `count` candidate tensors named prefix+i with `expected`. Fills
// the error measures of `result` with the worst output.
bool CompareList(const std::vector<TensorEntry>& expected, const Frame& expected_frame,
                 const std::map<std::string, TensorEntry>& got, const Frame& got_frame,
                 const std::string& prefix, const kforge::v1::Tolerances& tolerances,
                 kforge::v1::InputSetResult& result, std::string& message) {
  for (size_t i = 0; i < expected.size(); ++i) {
    auto it = got.find(absl::StrCat(prefix, i));
    if (it == got.end()) {
      message = absl::StrCat("the candidate returned ", i, " outputs; the reference returns ",
                             expected.size());
      return false;
    }
    absl::StatusOr<TensorView> want = View(expected[i], expected_frame);
    absl::StatusOr<TensorView> have = View(it->second, got_frame);
    if (!want.ok() || !have.ok()) {
      message = absl::StrCat("output ", i, ": ", (want.ok() ? have.status() : want.status()).message());
      return false;
    }
    const Tolerance tolerance = ToleranceFor(expected[i].dtype, tolerances);
    const CompareResult compared = CompareTensors(*want, *have, tolerance);
    result.set_max_abs_error(std::max(result.max_abs_error(), compared.max_abs_error));
    result.set_rel_l2_error(std::max(result.rel_l2_error(), compared.rel_l2_error));
    // Elementwise tolerance is relative to each element, which a reduction
    // with cancellation (a sum near zero of large terms) cannot meet in any
    // summation order; the tensor as a whole within rtol in relative L2 also
    // passes. Lower-precision arithmetic (TF32, bf16: 3e-4 and above) and
    // unwritten or non-finite elements still fail.
    const bool normwise = compared.mismatched > 0 && std::isfinite(compared.rel_l2_error) &&
                          compared.rel_l2_error <= tolerance.rtol;
    if (!compared.passed && !normwise) {
      message = expected.size() > 1 ? absl::StrCat("output ", i, ": ", compared.message)
                                    : compared.message;
      return false;
    }
  }
  if (got.contains(absl::StrCat(prefix, expected.size()))) {
    message = absl::StrCat("the candidate returned more outputs than the reference's ",
                           expected.size());
    return false;
  }
  return true;
}

}  // namespace

Tolerance ToleranceFor(const std::string& dtype, const kforge::v1::Tolerances& t) {
  auto make = [](const kforge::v1::Tolerance& tol) { return Tolerance{tol.atol(), tol.rtol()}; };
  if (dtype == "float32" || dtype == "float64") {
    return make(t.allow_reduced_precision() ? t.bf16() : t.fp32());
  }
  if (dtype == "float16") return make(t.fp16());
  if (dtype == "bfloat16") return make(t.bf16());
  return Tolerance{0, 0};  // integers and booleans compare exactly
}

std::string ReferenceSet::DisplayName() const {
  return fit_scale < 1.0 ? absl::StrCat(spec.name, "@", fit_scale) : spec.name;
}

absl::StatusOr<std::map<std::string, ReferenceSet>> ParsePrepared(
    const Frame& prepared, const std::vector<InputSetSpec>& specs) {
  const std::map<std::string, TensorEntry> tensors = ByName(prepared);
  const google::protobuf::Value* sets = prepared.Get("sets");
  if (sets == nullptr) return absl::DataLossError("prepared frame without sets");
  std::map<std::string, ReferenceSet> out;
  for (const google::protobuf::Value& value : sets->list_value().values()) {
    const auto& f = value.struct_value().fields();
    ReferenceSet set;
    const std::string name = f.count("name") ? f.at("name").string_value() : "";
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [&](const InputSetSpec& s) { return s.name == name; });
    if (spec == specs.end()) return absl::DataLossError(absl::StrCat("unplanned set ", name));
    set.spec = *spec;
    auto field = [&](const char* key) -> const google::protobuf::Value& {
      static const google::protobuf::Value* const kNull = new google::protobuf::Value();
      auto it = f.find(key);
      return it == f.end() ? *kNull : it->second;
    };
    set.ok = field("ok").bool_value();
    set.message = field("message").string_value();
    if (set.ok) {
      if (f.count("fit_scale")) set.fit_scale = field("fit_scale").number_value();
      set.init_inputs = field("init_inputs");
      set.scalars = field("scalars");
      std::set<int> scalar_positions;
      for (const auto& s : set.scalars.list_value().values()) {
        if (s.list_value().values_size() > 0) {
          scalar_positions.insert(static_cast<int>(s.list_value().values(0).number_value()));
        }
      }
      const int inputs = static_cast<int>(std::clamp(field("inputs").number_value(), 0.0, 1e6));
      for (int i = 0; i < inputs; ++i) {
        auto it = tensors.find(absl::StrCat(name, "/in", i));
        if (it == tensors.end()) {
          if (scalar_positions.contains(i)) continue;  // a plain number
          return absl::DataLossError(absl::StrCat("set ", name, " lacks input ", i));
        }
        set.inputs.push_back(it->second);
        set.input_positions.push_back(i);
      }
      const int outputs = static_cast<int>(std::clamp(field("outputs").number_value(), 0.0, 1e6));
      for (int i = 0; i < outputs; ++i) {
        auto it = tensors.find(absl::StrCat(name, "/out", i));
        if (it == tensors.end()) {
          return absl::DataLossError(absl::StrCat("set ", name, " lacks output ", i));
        }
        set.outputs.push_back(it->second);
      }
    }
    out[name] = std::move(set);
  }
  return out;
}

absl::Status ShareInputs(const Frame& prepared, ReferenceSet& set) {
  uint64_t total = 0;
  for (const TensorEntry& e : set.inputs) total += e.nbytes;
  KF_ASSIGN_OR_RETURN(SharedMemory buffer,
                      SharedMemory::Create(absl::StrCat("kforge-inputs-", set.spec.name), total));
  std::vector<uint64_t> offsets;
  uint64_t offset = 0;
  for (const TensorEntry& e : set.inputs) {
    const absl::string_view bytes = prepared.TensorBytes(e);
    KF_RETURN_IF_ERROR(buffer.Write(offset, bytes));
    offsets.push_back(offset);
    offset += bytes.size();
  }
  KF_RETURN_IF_ERROR(buffer.Seal());
  set.shared_inputs = std::make_shared<const SharedMemory>(std::move(buffer));
  set.shared_offsets = std::move(offsets);
  return absl::OkStatus();
}

uint64_t ReplyBytes(const ReferenceSet& set, int runs, bool with_inputs) {
  uint64_t total = 0;
  for (const TensorEntry& e : set.outputs) total += e.nbytes * static_cast<uint64_t>(runs);
  for (const TensorEntry& e : set.inputs) total += with_inputs ? e.nbytes : 0;
  return total;
}

void AttachInputs(const ReferenceSet& set, const Frame& prepared, Frame& request) {
  if (set.shared_inputs != nullptr) {
    const int buffer = request.Attach(set.shared_inputs);
    for (size_t i = 0; i < set.inputs.size(); ++i) {
      const TensorEntry& e = set.inputs[i];
      request.AddSharedTensor(absl::StrCat(set.spec.name, "/in", set.input_positions[i]), buffer,
                              set.shared_offsets[i], e.nbytes, e.dtype, e.shape);
    }
  } else {
    for (size_t i = 0; i < set.inputs.size(); ++i) {
      const TensorEntry& e = set.inputs[i];
      request.AddTensor(absl::StrCat(set.spec.name, "/in", set.input_positions[i]),
                        prepared.TensorBytes(e), e.dtype, e.shape);
    }
  }
  if (set.scalars.list_value().values_size() > 0) {
    (*(*request.header.mutable_fields())["scalars"].mutable_struct_value()->mutable_fields())
        [set.spec.name] = set.scalars;
  }
}

SetCheck CheckOutputsOnly(const ReferenceSet& set, const Frame& prepared, const Frame& reply,
                          const std::string& prefix, const kforge::v1::Tolerances& tolerances) {
  SetCheck check;
  check.result.set_name(set.DisplayName());
  std::string message;
  const bool ok = CompareList(set.outputs, prepared, ByName(reply), reply, prefix, tolerances,
                              check.result, message);
  check.result.set_passed(ok);
  check.result.set_message(message);
  return check;
}

SetCheck CheckCandidateOutputs(const ReferenceSet& set, const Frame& prepared, const Frame& reply,
                               int runs, bool check_inputs,
                               const kforge::v1::Tolerances& tolerances) {
  SetCheck check = CheckOutputsOnly(set, prepared, reply, "run0/out", tolerances);
  const std::map<std::string, TensorEntry> got = ByName(reply);
  std::string message;
  if (check.result.passed() && runs > 1) {
    kforge::v1::InputSetResult ignored;
    for (int r = 1; r < runs; ++r) {
      if (!CompareList(set.outputs, prepared, got, reply, absl::StrCat("run", r, "/out"),
                       tolerances, ignored, message)) {
        check.flags.emplace_back(kforge::v1::HACK_NONDETERMINISTIC,
                                 absl::StrCat(set.spec.name, ": run ", r + 1,
                                              " on the same input disagrees: ", message));
        check.result.set_passed(false);
        check.result.set_message(absl::StrCat("not the same answer twice: ", message));
        break;
      }
    }
  }
  // Inputs must come back byte for byte as they were sent.
  for (size_t i = 0; check_inputs && i < set.inputs.size(); ++i) {
    auto it = got.find(absl::StrCat("after/in", set.input_positions[i]));
    if (it == got.end() || reply.TensorBytes(it->second) != prepared.TensorBytes(set.inputs[i])) {
      check.flags.emplace_back(kforge::v1::HACK_INPUT_MUTATION,
                               absl::StrCat(set.spec.name, ": input ", i, " was modified"));
      check.result.set_passed(false);
      check.result.set_message(absl::StrCat("input ", i, " was modified by the candidate"));
      break;
    }
  }
  return check;
}

}  // namespace kforge
