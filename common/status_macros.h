// Macros that keep call sites flat when propagating absl::Status.
//
//   absl::StatusOr<Config> Load(const std::string& path) {
//     KF_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//     KF_RETURN_IF_ERROR(Validate(text));
//     ...
//   }
#ifndef KFORGE_COMMON_STATUS_MACROS_H_
#define KFORGE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define KF_RETURN_IF_ERROR(expr)                \
  do {                                          \
    ::absl::Status kf_status_ = (expr);         \
    if (!kf_status_.ok()) return kf_status_;    \
  } while (false)

#define KF_STATUS_CONCAT_INNER_(a, b) a##b
#define KF_STATUS_CONCAT_(a, b) KF_STATUS_CONCAT_INNER_(a, b)

#define KF_ASSIGN_OR_RETURN(lhs, expr) \
  KF_ASSIGN_OR_RETURN_IMPL_(KF_STATUS_CONCAT_(kf_statusor_, __LINE__), lhs, expr)

#define KF_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                               \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)

#endif  // KFORGE_COMMON_STATUS_MACROS_H_
