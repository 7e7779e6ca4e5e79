// The re-plans of one worker (docs/protocol.md, "Re-plan"): rank 0 asks for one between
// iterations; every server forwards it to every worker ahead of its values of the
// iteration it starts at; each worker switches its core to the new slices between that
// iteration's forward pass and its first gradient. Training is unchanged bit for bit.
//
// Example:
//   Replans replans({.rank = 0, .num_servers = 2, .values_on_push = true}, &core);
//   absl::StatusOr<std::vector<ToServer>> ask = replans.Request(20, iteration);  // rank 0
//   replans.Forwarded(server, from_iteration, slice_params);   // a transport's thread
//   absl::StatusOr<bool> switched = replans.SwitchIfDue(iteration);  // before a backward
//
// Thread-safe: Forwarded comes from the transports' threads, the rest from the training
// thread.
#ifndef P3_WORKER_REPLANS_H_
#define P3_WORKER_REPLANS_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "p3/core/to_server.h"
#include "p3/core/wire_dtype.h"
#include "p3/core/worker_core.h"

namespace p3 {

struct ReplansOptions {
  // This worker's rank: only rank 0 requests re-plans. Default: 0.
  int rank = 0;
  // Every server forwards each re-plan. Default: 1.
  int num_servers = 1;
  // What a re-plan needs besides ownership stripes: values on the push, a wire other than
  // float16 (its scale is per slice), a process that has not rejoined (it takes the plan
  // in force from the servers, WorkerCore::TakePlan, but not the dead process's search,
  // nor does it know whether that process had asked for a re-plan the servers have yet
  // to see). Defaults: true, float32, false.
  bool values_on_push = true;
  WireDType wire_dtype = WireDType::kFloat32;
  bool rejoin = false;
};

class Replans {
 public:
  // Switches `core` (not owned, must outlive this).
  Replans(const ReplansOptions& options, WorkerCore* core);

  // Rank 0 after the Backward of `iteration` - 1: slices `slice_params` long from the next
  // iteration on. Returns the Replan to send to every server (its from_iteration is that
  // iteration). Refused (FailedPrecondition) on another rank, without stripes, in modes
  // without values on the push, on a float16 wire, in a rejoined process, or while a
  // re-plan is pending; a slice size the plan cannot take as SlicePlan does.
  absl::StatusOr<std::vector<ToServer>> Request(int64_t slice_params, uint64_t iteration);

  // Server `server` forwarded a re-plan: queued until it takes effect, in the order of
  // their iterations (a slow worker may not have reached one before rank 0 asks for the
  // next). Internal, changing nothing, when it contradicts what another server forwarded
  // or comes out of order.
  absl::Status Forwarded(int server, uint64_t from_iteration, int64_t slice_params);

  // Before the first gradient of `iteration`: switches the core to the re-plan that starts
  // at `iteration`, if one does (every value of `iteration` is in, none of its gradients
  // sent). Returns whether it switched; an error (a re-plan that arrived late or not from
  // every server, or that the core refuses) names this worker and fails the run.
  absl::StatusOr<bool> SwitchIfDue(uint64_t iteration);

  // Re-plans that have taken effect.
  int count() const;

 private:
  struct Pending {
    uint64_t from_iteration = 0;
    int64_t slice_params = 0;
    std::vector<int> servers;  // that have forwarded it
  };

  const ReplansOptions options_;
  WorkerCore* const core_;
  mutable absl::Mutex mu_;
  // The re-plans the servers forwarded, until they take effect, by iteration.
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  // The first iteration of the last one this worker (rank 0) requested.
  uint64_t requested_from_ ABSL_GUARDED_BY(mu_) = 0;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace p3

#endif  // P3_WORKER_REPLANS_H_
