#include "worker/first_failure.h"

#include "absl/strings/str_cat.h"

namespace p3 {

bool FirstFailure::Record(const absl::Status& status) {
  if (status.ok()) return false;
  absl::MutexLock lock(&mu_);
  if (!first_.ok()) return false;
  if (pending_abort_.empty()) {
    first_ = status;
  } else {
    // A server aborted the run a moment ago; this worker's own failure is the cause, the
    // Abort what followed from it.
    first_ = absl::Status(status.code(), absl::StrCat(status.message(), " (then ", pending_abort_,
                                                      ", which follows from it)"));
  }
  return true;
}

bool FirstFailure::Abort(const absl::Status& abort, absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  if (!first_.ok()) return false;
  if (pending_abort_.empty()) pending_abort_ = std::string(abort.message());
  mu_.AwaitWithTimeout(
      absl::Condition(+[](absl::Status* first) { return !first->ok(); }, &first_), grace);
  if (!first_.ok()) return false;  // the worker's own failure came first: recorded
  first_ = abort;
  return true;
}

absl::Status FirstFailure::Get() const {
  absl::MutexLock lock(&mu_);
  return first_;
}

bool FirstFailure::holding_abort() const {
  absl::MutexLock lock(&mu_);
  return first_.ok() && !pending_abort_.empty();
}

}  // namespace p3
