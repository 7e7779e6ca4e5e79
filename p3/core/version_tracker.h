// Which version of each slice a worker holds, and waiting for the slices a layer needs.
//
// The receive path (WorkerCore, p3/core/worker_core.h) marks a slice as arrived after
// writing its values into the parameters; the forward pass waits for the slices of the
// next block only, so it starts each layer as soon as that layer's parameters are in.
// This is the worker's one record of the version each slice holds: the core checks
// every received part against it.
//
// Example:
//   VersionTracker tracker(plan.slices().size());
//   tracker.MarkArrived(slice_id, version);                  // receive thread
//   absl::Status s = tracker.WaitFor(first, last, version,   // training thread
//                                    absl::Now() + absl::Seconds(60));
//
// Thread-safe.
#ifndef P3_P3_CORE_VERSION_TRACKER_H_
#define P3_P3_CORE_VERSION_TRACKER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace p3 {

class VersionTracker {
 public:
  // Every slice starts with no version at all.
  explicit VersionTracker(int num_slices);

  // Slice `slice_id` now holds `version`. Versions only grow; an older one is ignored.
  void MarkArrived(int slice_id, uint64_t version);

  // The version slice `slice_id` holds; none before its first arrives (or for an id
  // outside [0, num_slices)).
  std::optional<uint64_t> Version(int slice_id) const;

  // Blocks until slices [first, last) all hold at least `version`. Returns
  // DeadlineExceeded at `deadline`, or the status given to Abort().
  absl::Status WaitFor(int first, int last, uint64_t version, absl::Time deadline);

  // Now `num_slices` slices, every one holding `version` (a re-plan: WorkerCore::Replan).
  void Reset(int num_slices, uint64_t version);
  // Now `num_slices` slices, none holding a version yet (the plan a worker takes from the
  // servers before it starts: WorkerCore::TakePlan).
  void Reset(int num_slices);

  // Wakes every waiter, now and later, with `status` (not OK). The first call wins.
  void Abort(absl::Status status);

  // Number of slices in [first, last) holding less than `version`.
  int Missing(int first, int last, uint64_t version) const;
  // Their ids, ascending.
  std::vector<int> MissingSlices(int first, int last, uint64_t version) const;

  // Threads blocked in WaitFor() now. For tests and monitoring.
  int waiters() const;

  // For tests: returns once at least `n` threads are blocked in WaitFor().
  void AwaitWaiters(int n) const;

 private:
  mutable absl::Mutex mu_;
  // versions_[i] = version + 1 of slice i, 0 when nothing has arrived.
  std::vector<uint64_t> versions_ ABSL_GUARDED_BY(mu_);
  absl::Status abort_status_ ABSL_GUARDED_BY(mu_);
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;  // Threads inside WaitFor()'s wait.
};

}  // namespace p3

#endif  // P3_P3_CORE_VERSION_TRACKER_H_
