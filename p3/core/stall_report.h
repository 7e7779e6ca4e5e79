// Reports of waits that have stalled, without any transport: what a server waits for
// (which workers' gradients of which slices) and what a worker waits for (which server's
// values of which block). A wait that lasts cluster.stall_report_s is logged, and again
// every stall_report_s while it lasts, so that a hung or slow run names its cause long
// before peer_timeout ends it (docs/reliability.md, "Stalls").
//
// Example (a server's watch thread, every stall_report_s / 4):
//   GradientStallWatch watch(/*server_index=*/0, absl::Seconds(10));
//   if (std::optional<StallReport> r = watch.Observe(shard.Waits(), absl::Now())) {
//     std::cerr << r->text << std::endl;
//   }
#ifndef P3_P3_CORE_STALL_REPORT_H_
#define P3_P3_CORE_STALL_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "p3/core/slice_plan.h"

namespace p3 {

// A slice of a server's shard whose gradients of `iteration` (its current version) are
// not all in: the ranks whose gradient is missing.
struct SliceWait {
  int slice_id = 0;
  uint64_t iteration = 0;
  std::vector<int> missing_ranks;  // ascending
};

struct StallReport {
  absl::Duration waited;           // by the longest-waiting slice
  uint64_t iteration = 0;          // the oldest iteration waited for
  std::vector<int> missing_ranks;  // over all stalled slices, ascending
  // One line: "[stall] server 0: waited 10s for the gradients of iteration 12: worker 1
  // (40 slices: 0, 1, 2, ...)".
  std::string text;
};

// Follows a server's waits from one observation to the next. Not thread-safe: one
// watcher thread calls it.
class GradientStallWatch {
 public:
  GradientStallWatch(int server_index, absl::Duration after);

  // The shard's waits at `now`. Returns a report when some slice of the oldest iteration
  // awaited has waited at least `after` at it, unless one was returned less than `after`
  // ago. Slices of later iterations are left out: they wait for an iteration that cannot
  // start before the oldest one ends, so every worker is "missing" there.
  std::optional<StallReport> Observe(const std::vector<SliceWait>& waits, absl::Time now);

 private:
  const int server_index_;
  const absl::Duration after_;
  // Per slice: the iteration last seen waiting and since when.
  std::map<int, std::pair<uint64_t, absl::Time>> since_;
  absl::Time last_report_ = absl::InfinitePast();
};

// "[stall] worker 0: waited 10s for version 12 of block 3 (conv2): server 1's values of
// 4 slices (17, 18, 19, 20)": the slices of `missing` (ids into `plan`) grouped by the
// server that owns them.
std::string DescribeValueWait(int rank, absl::Duration waited, uint64_t version,
                              const std::string& what, const std::vector<int>& missing,
                              const SlicePlan& plan);

// "server 0's values of 2 slices (4, 6); server 1's values of 1 slice (5)": the slices of
// `missing` (ids into `plan`) grouped by the server that owns them; "" when none is.
std::string DescribeValuesOwed(const std::vector<int>& missing, const SlicePlan& plan);

// What the servers told a worker they wait for (their Stall messages, docs/protocol.md):
// the latest one of each server. A worker whose wait for parameters times out adds it to
// its error, so the report names the worker that holds the run up (a partitioned link),
// not only the one that gave up waiting. Thread-safe: transports' reader threads Note(),
// the training thread Describe()s.
class StallHints {
 public:
  // Server `server` has waited for the gradients of `iteration` from `missing_ranks`.
  void Note(int server, uint64_t iteration, std::vector<int> missing_ranks);

  // "the servers wait for the gradients of iteration 18 from worker 0 (server 0, server
  // 1 said so)", from the hints of `iteration` only (older ones are over); "" when none.
  std::string Describe(uint64_t iteration) const;

 private:
  mutable absl::Mutex mu_;
  // Server -> (iteration, missing ranks).
  std::map<int, std::pair<uint64_t, std::vector<int>>> latest_ ABSL_GUARDED_BY(mu_);
};

// "0, 1, 2, ... (40 in all)": at most `shown` ids, then the count.
std::string ListIds(const std::vector<int>& ids, size_t shown = 8);

}  // namespace p3

#endif  // P3_P3_CORE_STALL_REPORT_H_
