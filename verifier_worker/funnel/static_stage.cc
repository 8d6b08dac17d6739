// Stage 1: the candidate's code is extracted from the completion and checked
// statically by the zygote (harness static_check.py), which never runs it.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "verifier_worker/extract/code_extraction.h"
#include "verifier_worker/funnel/verification.h"

namespace kforge {

bool Funnel::Run::Static() {
  v1::StageResult* stage = Begin(v1::STAGE_STATIC);
  absl::StatusOr<ExtractedCode> extracted = ExtractCandidateCode(request_.completion());
  if (!extracted.ok()) {
    return End(stage, v1::OUTCOME_FAILED, std::string(extracted.status().message()));
  }
  code_ = extracted->code;
  verdict_.set_extracted_code(code_);
  auto static_check = [&]() -> absl::StatusOr<Frame> {
    KF_ASSIGN_OR_RETURN(std::shared_ptr<ZygoteClient> zygote, f_.Zygote());
    return zygote->StaticCheck(code_, options_.require_triton(), limits_.max_source_bytes(),
                               absl::Seconds(30));
  };
  absl::StatusOr<Frame> result = static_check();
  // A zygote that died under this request (UNAVAILABLE) is replaced by the
  // next Zygote() call: one more try, so the candidate is not failed for it.
  if (absl::IsUnavailable(result.status())) result = static_check();
  if (!result.ok()) {
    internal_error_ = true;
    return End(stage, v1::OUTCOME_INTERNAL_ERROR, std::string(result.status().message()));
  }
  std::vector<std::string> messages;
  if (const auto* findings = result->Get("findings")) {
    for (const auto& finding : findings->list_value().values()) {
      const auto& fields = finding.struct_value().fields();
      const std::string message = fields.at("message").string_value();
      messages.push_back(message);
      v1::HackFlag flag;
      if (v1::HackFlag_Parse(fields.at("flag").string_value(), &flag)) Flag(flag, message);
    }
  }
  // Every @triton.jit function of the module is the candidate's own: a
  // kernel launched through a helper the checker cannot follow still is.
  if (const auto* kernels = result->Get("kernels")) {
    for (const auto& k : kernels->list_value().values()) own_kernels_.push_back(k.string_value());
  }
  cache_key_ = absl::StrCat(result->GetString("normalized_sha256"), ":",
                            HexHash(request_.task().reference_source()), ":",
                            HexHash(options_.SerializeAsString()), ":",
                            HexHash(absl::StrJoin(request_.task().allowed_library_ops(), ",")),
                            ":", f_.device_name_);
  if (!result->GetBool("ok")) return End(stage, v1::OUTCOME_FAILED, absl::StrJoin(messages, "\n"));
  return End(stage, v1::OUTCOME_PASSED);
}

}  // namespace kforge
