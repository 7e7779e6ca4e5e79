// A worker's view of an elastic run's membership (docs/reliability.md, "Elastic
// membership"): the changes rank 0 asks for, as the servers forward them, and when this
// worker takes part.
//
// Every server forwards each change ahead of its values of the change's iteration T, so
// once a worker holds every value of version t it knows every change up to t. A worker
// that a change leaves out from T receives no values of T: once it has finished iteration
// T-1 and knows of the change, `release(T)` ends its waits for them (the Worker resets the
// version tracker to T), and PresentAt(T) tells it to leave.
//
// Example (the Worker's use):
//   ElasticMembership m({.rank = 2, .num_servers = 2, .max_ranks = 3, .initial = 2}, release);
//   m.Forwarded(/*server=*/0, 100, {0, 1, 2});            // transports' threads
//   absl::StatusOr<uint64_t> first = m.AwaitJoin(deadline); // a joining worker: 100
//
// Thread-safe.
#ifndef P3_WORKER_ELASTIC_MEMBERSHIP_H_
#define P3_WORKER_ELASTIC_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "p3/core/membership.h"
#include "p3/core/to_server.h"

namespace p3 {

struct ElasticMembershipOptions {
  int rank = 0;         // this worker. Default: 0.
  int num_servers = 1;  // Default: 1.
  int max_ranks = 1;    // cluster.elastic.max_workers. Default: 1.
  int initial = 1;      // ranks 0..initial-1 take part from iteration 0. Default: 1.
};

class ElasticMembership {
 public:
  // `release(version)` runs (with this object's lock held; it must not call back) when
  // this worker leaves at `version` and has finished the iteration before it.
  ElasticMembership(const ElasticMembershipOptions& options,
                    std::function<void(uint64_t)> release);

  // Rank 0, between iterations, at `iteration` (before its forward pass): the change to
  // `present` from iteration + 1 on, as a message for every server, urgent (ahead of this
  // iteration's gradients). FailedPrecondition on another rank; the change must fit the
  // ones so far (MembershipSchedule::Check).
  absl::StatusOr<std::vector<ToServer>> Request(uint64_t iteration,
                                                const std::vector<int>& present);

  // Server `server` forwarded a change (every server forwards the same ones, in order; a
  // worker that said Hello mid-run may get one twice). Internal for a change that
  // contradicts the ones known.
  absl::Status Forwarded(int server, uint64_t from_iteration, std::vector<int> present);

  // The training thread has finished every iteration before `iteration`.
  void Reached(uint64_t iteration);

  // A joining worker, before its first iteration: blocks until a change makes this rank
  // present and returns its iteration. DeadlineExceeded at `deadline`, or Abort()'s status.
  absl::StatusOr<uint64_t> AwaitJoin(absl::Time deadline);

  // The ranks present in `iteration`, as far as the changes known now say.
  std::vector<int> PresentAt(uint64_t iteration) const;
  // Every change known, the first from iteration 0.
  std::vector<MembershipChange> changes() const;

  // Wakes AwaitJoin, now and later, with `status` (not OK).
  void Abort(const absl::Status& status);

 private:
  // Releases the waits for the version this worker leaves at, once it is due.
  void MaybeReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ElasticMembershipOptions options_;
  const std::function<void(uint64_t)> release_;
  mutable absl::Mutex mu_;
  MembershipSchedule schedule_ ABSL_GUARDED_BY(mu_);
  uint64_t reached_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status abort_ ABSL_GUARDED_BY(mu_);
};

}  // namespace p3

#endif  // P3_WORKER_ELASTIC_MEMBERSHIP_H_
