// The first failure a worker process saw, kept for the rest of its life.
#ifndef P3_WORKER_FIRST_FAILURE_H_
#define P3_WORKER_FIRST_FAILURE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace p3 {

// The first failure of a worker: once one is recorded, every later call of the worker
// reports it, so a follow-on — a wait cut short by it, a stream that ends because of it,
// a timeout after a peer stalled, a server's Abort about it — never takes the cause's
// place (docs/reliability.md, "Every report names the first failure").
//
// One exception waits: a server's Abort may itself follow from a failure this worker is
// about to see (a dead server breaks its stream to every worker at once, while another
// server aborts the run naming only the worker it lost in consequence). An Abort is held
// up to a grace period for a failure of the worker's own; one that comes is the cause,
// quoting the Abort as what followed.
//
// Thread-safe.
//
// Example:
//   FirstFailure failure;
//   failure.Record(absl::UnavailableError("server 1 (10.0.0.2:50051): Socket closed"));
//   failure.Record(absl::DeadlineExceededError("waited 5s for parameters"));  // ignored
//   failure.Get();  // UNAVAILABLE: server 1 (10.0.0.2:50051): Socket closed
class FirstFailure {
 public:
  // Records `status` (not OK) unless a failure is recorded already; true if this call
  // recorded it. With an Abort held (Abort), `status` is recorded as the cause and the
  // Abort as what followed: "<status> (then <abort>, which follows from it)".
  bool Record(const absl::Status& status);

  // A server's Abort: waits up to `grace` for a failure of the worker's own (Record);
  // if none comes, records `abort`. True if `abort` was recorded. Blocks the caller (a
  // transport's reader thread) for up to `grace`.
  bool Abort(const absl::Status& abort, absl::Duration grace);

  // The failure recorded; OK while there is none.
  absl::Status Get() const;

  // Whether an Abort is held (Abort waiting for the worker's own failure).
  bool holding_abort() const;

 private:
  mutable absl::Mutex mu_;
  absl::Status first_ ABSL_GUARDED_BY(mu_);
  // The message of an Abort held by Abort(); empty when none.
  std::string pending_abort_ ABSL_GUARDED_BY(mu_);
};

}  // namespace p3

#endif  // P3_WORKER_FIRST_FAILURE_H_
