// Two small macros for Status-based control flow (Debian's Abseil has none).
#ifndef P3_P3_BASE_STATUS_MACROS_H_
#define P3_P3_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define P3_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::absl::Status p3_status_ = (expr);          \
    if (!p3_status_.ok()) return p3_status_;     \
  } while (0)

#define P3_STATUS_CONCAT_INNER_(a, b) a##b
#define P3_STATUS_CONCAT_(a, b) P3_STATUS_CONCAT_INNER_(a, b)

// `lhs = value of rexpr` (an absl::StatusOr<T>), or returns its status.
#define P3_ASSIGN_OR_RETURN(lhs, rexpr) \
  P3_ASSIGN_OR_RETURN_IMPL_(P3_STATUS_CONCAT_(p3_statusor_, __LINE__), lhs, rexpr)

#define P3_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                              \
  if (!statusor.ok()) return statusor.status();         \
  lhs = std::move(statusor).value()

#endif  // P3_P3_BASE_STATUS_MACROS_H_
