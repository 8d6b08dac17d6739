// LibTorch reports errors by throwing c10::Error; kforge returns
// absl::Status. These helpers run a LibTorch computation and turn whatever it
// throws into a status that names the operation, so no exception leaves the
// transformer library.
//
//   absl::StatusOr<at::Tensor> logits = TorchCall("decoder forward", [&] {
//     return RunDecoder(input_ids);
//   });
#ifndef KFORGE_MODEL_TRANSFORMER_TORCH_STATUS_H_
#define KFORGE_MODEL_TRANSFORMER_TORCH_STATUS_H_

#include <exception>
#include <type_traits>
#include <utility>

#include <c10/util/Exception.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kforge {

// INTERNAL, "<context>: <LibTorch's message without its C++ backtrace>".
absl::Status TorchErrorStatus(absl::string_view context, const c10::Error& error);
// The same for other exceptions (std::bad_alloc, ...).
absl::Status ExceptionStatus(absl::string_view context, const std::exception& error);

namespace torch_status_internal {
template <typename T>
struct Wrap {
  using type = absl::StatusOr<T>;
};
template <>
struct Wrap<absl::Status> {
  using type = absl::Status;
};
template <typename T>
struct Wrap<absl::StatusOr<T>> {
  using type = absl::StatusOr<T>;
};
}  // namespace torch_status_internal

// Runs fn(), which returns T, absl::Status or absl::StatusOr<T>; exceptions
// become statuses prefixed with `context`.
template <typename Fn>
auto TorchCall(absl::string_view context, Fn&& fn) {
  using Returned = typename torch_status_internal::Wrap<std::invoke_result_t<Fn>>::type;
  try {
    return Returned(std::forward<Fn>(fn)());
  } catch (const c10::Error& error) {
    return Returned(TorchErrorStatus(context, error));
  } catch (const std::exception& error) {
    return Returned(ExceptionStatus(context, error));
  }
}

}  // namespace kforge

#endif  // KFORGE_MODEL_TRANSFORMER_TORCH_STATUS_H_
