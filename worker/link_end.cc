#include "worker/link_end.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace p3 {

LinkEnd::LinkEnd(int server_index, std::string address, std::string noun,
                 TransportListener* listener)
    : server_index_(server_index),
      address_(std::move(address)),
      noun_(std::move(noun)),
      listener_(listener) {}

absl::Status LinkEnd::Named(const absl::Status& status) const {
  return absl::Status(status.code(), absl::StrCat("server ", server_index_, " (", address_,
                                                  "): ", status.message()));
}

void LinkEnd::Closing() {
  absl::MutexLock lock(&mu_);
  closing_ = true;
}

void LinkEnd::Ended(const absl::Status& abort, const absl::Status& failure,
                    const absl::Status& finished) {
  bool closing;
  {
    absl::MutexLock lock(&mu_);
    closing = closing_;
  }
  absl::Status status = finished;
  if (!abort.ok()) {
    status = abort;
  } else if (!failure.ok()) {
    status = failure;
  } else if (status.ok() && !closing) {
    status = absl::UnavailableError(absl::StrCat("server ", server_index_, " ended the ", noun_,
                                                 " before the worker was done"));
  }
  // Outside the lock: OnAbort may wait (WorkerOptions::abort_grace).
  if (!abort.ok()) {
    listener_->OnAbort(server_index_, status);
  } else if (!status.ok()) {
    listener_->OnFailure(server_index_, status);
  }
  absl::MutexLock lock(&mu_);
  final_status_ = status;
  ended_ = true;
}

absl::Status LinkEnd::Await(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithDeadline(absl::Condition(&ended_), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat("server ", server_index_, " did not close the ", noun_, " in time"));
  }
  return final_status_;
}

}  // namespace p3
