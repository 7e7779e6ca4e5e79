// The mean over all workers of their model's floating-point buffers (BatchNorm's running
// mean and variance), without any transport.
//
// Buffers are not trained: each worker's running statistics follow its own batches, so
// after a data-parallel run every worker holds different ones, and a model evaluated or
// exported by one worker would not be the cluster's. Before an evaluation and at the end
// of a run every worker contributes its buffers, flattened in the model's order, and
// receives the mean over all workers (docs/protocol.md, "Buffers"). Server 0 keeps one
// BufferAverage.
//
// The mean is deterministic: the contributions are summed in rank order, whatever order
// they arrive in, then divided by the number of workers (in an elastic run, of the
// round's present workers).
//
// Rounds are named by the iteration at which the workers exchange (they increase, not
// necessarily by one). A worker that restarted (docs/protocol.md, "Rejoining worker")
// may send the round that has just completed again: it gets that round's mean back.
//
// Example:
//   BufferAverage average(/*num_workers=*/2);
//   auto r0 = average.Add(/*rank=*/0, /*round=*/100, a.data(), a.size());  // no mean yet
//   auto r1 = average.Add(/*rank=*/1, /*round=*/100, b.data(), b.size());  // (a + b) / 2
//
// Thread-safe.
#ifndef P3_P3_CORE_BUFFER_AVERAGE_H_
#define P3_P3_CORE_BUFFER_AVERAGE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace p3 {

class BufferAverage {
 public:
  explicit BufferAverage(int num_workers);

  struct Mean {
    std::shared_ptr<const std::vector<float>> values;  // null: the round is still open
    bool for_everyone = false;  // the round completed now; else only the caller's
  };

  // Worker `rank`'s `n` buffer values (no alignment assumed) for round `round`. When they
  // complete the round, returns its mean for every worker. A contribution to the round
  // that completed last returns that mean for the caller alone (a restarted worker
  // sending again). Refused without changing anything: a rank out of range; a round
  // other than the open one while one is open; with none open, a round below the last
  // completed one; a length that differs from the round's. A second contribution of the
  // same rank to the open round replaces its first.
  absl::StatusOr<Mean> Add(int rank, uint64_t round, const float* values, int64_t n);
  // The same in an elastic run (docs/reliability.md, "Elastic membership"): the round's
  // contributors are the ranks of `present` (increasing, each below num_workers; the
  // shard passes the ranks that trained the iteration before the round), summed in rank
  // order and divided by their count. A rank not in `present` is refused, as are ranks
  // that differ from the open round's.
  absl::StatusOr<Mean> Add(int rank, uint64_t round, const float* values, int64_t n,
                           const std::vector<int>& present);

 private:
  const int num_workers_;
  const std::vector<int> all_ranks_;  // 0..num_workers-1
  mutable absl::Mutex mu_;
  std::optional<uint64_t> open_ ABSL_GUARDED_BY(mu_);       // the round being gathered
  std::optional<uint64_t> completed_ ABSL_GUARDED_BY(mu_);  // the last completed one
  std::shared_ptr<const std::vector<float>> last_mean_ ABSL_GUARDED_BY(mu_);
  // The open round's contributions by rank; empty vectors for the missing ranks.
  std::vector<std::vector<float>> contributions_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> arrived_ ABSL_GUARDED_BY(mu_);
  int arrived_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t length_ ABSL_GUARDED_BY(mu_) = -1;  // of the open round; -1: nothing arrived
  std::vector<int> present_ ABSL_GUARDED_BY(mu_);  // the open round's contributors
};

}  // namespace p3

#endif  // P3_P3_CORE_BUFFER_AVERAGE_H_
