#include "model/transformer/torch_status.h"

namespace kforge {

absl::Status TorchErrorStatus(absl::string_view context, const c10::Error& error) {
  return absl::InternalError(absl::StrCat(context, ": ", error.what_without_backtrace()));
}

absl::Status ExceptionStatus(absl::string_view context, const std::exception& error) {
  return absl::InternalError(absl::StrCat(context, ": ", error.what()));
}

}  // namespace kforge
