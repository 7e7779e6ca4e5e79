#include "p3/core/version_tracker.h"

#include "absl/strings/str_cat.h"

namespace p3 {

VersionTracker::VersionTracker(int num_slices) : versions_(num_slices, 0) {}

void VersionTracker::MarkArrived(int slice_id, uint64_t version) {
  absl::MutexLock lock(&mu_);
  if (slice_id < 0 || slice_id >= static_cast<int>(versions_.size())) return;
  if (versions_[slice_id] < version + 1) versions_[slice_id] = version + 1;
}

std::optional<uint64_t> VersionTracker::Version(int slice_id) const {
  absl::MutexLock lock(&mu_);
  if (slice_id < 0 || slice_id >= static_cast<int>(versions_.size())) return std::nullopt;
  if (versions_[slice_id] == 0) return std::nullopt;
  return versions_[slice_id] - 1;
}

absl::Status VersionTracker::WaitFor(int first, int last, uint64_t version, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  // Slices before `cursor` are known to be ready; versions never go down.
  int cursor = first;
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!abort_status_.ok()) return true;
    while (cursor < last && versions_[cursor] >= version + 1) ++cursor;
    return cursor >= last;
  };
  ++waiters_;
  const bool in_time = mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  --waiters_;
  if (!in_time) {
    int missing = 0;
    for (int i = first; i < last; ++i) missing += versions_[i] < version + 1;
    return absl::DeadlineExceededError(absl::StrCat(
        missing, " of ", last - first, " parameter slices (first missing: slice ", cursor,
        ") did not reach version ", version, " in time"));
  }
  return abort_status_;
}

void VersionTracker::Abort(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (abort_status_.ok()) abort_status_ = std::move(status);
}

int VersionTracker::Missing(int first, int last, uint64_t version) const {
  absl::MutexLock lock(&mu_);
  int missing = 0;
  for (int i = first; i < last; ++i) missing += versions_[i] < version + 1;
  return missing;
}

std::vector<int> VersionTracker::MissingSlices(int first, int last, uint64_t version) const {
  absl::MutexLock lock(&mu_);
  std::vector<int> missing;
  for (int i = first; i < last; ++i) {
    if (versions_[i] < version + 1) missing.push_back(i);
  }
  return missing;
}

int VersionTracker::waiters() const {
  absl::MutexLock lock(&mu_);
  return waiters_;
}

void VersionTracker::AwaitWaiters(int n) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waiters_ >= n; };
  mu_.Await(absl::Condition(&enough));
}

void VersionTracker::Reset(int num_slices) {
  absl::MutexLock lock(&mu_);
  versions_.assign(static_cast<size_t>(num_slices), 0);
}

void VersionTracker::Reset(int num_slices, uint64_t version) {
  absl::MutexLock lock(&mu_);
  versions_.assign(static_cast<size_t>(num_slices), version + 1);
}

}  // namespace p3
