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
// they arrive in, then divided by the number of workers.
//
// Example:
//   BufferAverage average(/*num_workers=*/2);
//   auto r0 = average.Add(/*rank=*/0, /*round=*/0, a.data(), a.size());  // null: waiting
//   auto r1 = average.Add(/*rank=*/1, /*round=*/0, b.data(), b.size());  // (a + b) / 2
//
// Thread-safe.
#ifndef P3_P3_BUFFER_AVERAGE_H_
#define P3_P3_BUFFER_AVERAGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace p3 {

class BufferAverage {
 public:
  explicit BufferAverage(int num_workers);

  // Worker `rank`'s `n` buffer values (no alignment assumed) of exchange `round`. Returns the mean once every
  // worker's contribution to `round` is in (the call that completes it), else null.
  // Rounds complete in order: a contribution to a round that has completed, or to any
  // round but the open one once one is open, is refused, as is a length that differs
  // from the round's first contribution, or a rank out of range; nothing changes then.
  // A second contribution of the same rank to the open round replaces its first (a
  // worker that restarted sends again).
  absl::StatusOr<std::shared_ptr<const std::vector<float>>> Add(int rank, uint64_t round,
                                                                 const float* values, int64_t n);

  // The round the next contribution belongs to: completed rounds so far.
  uint64_t next_round() const;

 private:
  const int num_workers_;
  mutable absl::Mutex mu_;
  uint64_t round_ ABSL_GUARDED_BY(mu_) = 0;
  // The open round's contributions by rank; empty vectors for the missing ranks.
  std::vector<std::vector<float>> contributions_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> arrived_ ABSL_GUARDED_BY(mu_);
  int arrived_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t length_ ABSL_GUARDED_BY(mu_) = -1;  // of the open round; -1: nothing arrived
};

}  // namespace p3

#endif  // P3_P3_BUFFER_AVERAGE_H_
