// Cutting a model's block list into contiguous pipeline stages.
//
// A partition is given by its boundaries: the first block of each stage after the first,
// strictly increasing, so N stages over B blocks have N-1 boundaries in 1..B-1 and stage
// k runs blocks [begin_k, end_k). BalancedBoundaries() chooses them from per-block costs
// (e.g. profiled forward + backward seconds, pipeline/profile.h) so that the most
// expensive stage is as cheap as possible, the stage that bounds a pipeline's throughput
// (PipeDream's partitioner minimises the same; it also weighs communication, which is a
// pointer hand-over between threads here).
//
// Example:
//   absl::StatusOr<std::vector<int64_t>> cut = BalancedBoundaries({1, 4, 2, 1}, 2);
//   // *cut == {2}: stage 0 runs blocks 0-1 (cost 5), stage 1 blocks 2-3 (cost 3)
//   std::vector<StageRange> ranges = StageRanges(*cut, 4);  // {0,2}, {2,4}
//
// Plain functions: thread-safe.
#ifndef P3_PIPELINE_PARTITION_H_
#define P3_PIPELINE_PARTITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace p3::pipeline {

struct StageRange {
  int64_t begin = 0;  // first block
  int64_t end = 0;    // one past the last block

  bool operator==(const StageRange& other) const {
    return begin == other.begin && end == other.end;
  }
};

// OK when `boundaries` cut `num_blocks` blocks into boundaries.size() + 1 non-empty
// stages; InvalidArgumentError saying which boundary is wrong otherwise.
absl::Status ValidateBoundaries(const std::vector<int64_t>& boundaries, int64_t num_blocks);

// The stages' block ranges; `boundaries` must be valid.
std::vector<StageRange> StageRanges(const std::vector<int64_t>& boundaries, int64_t num_blocks);

// The boundaries that minimise the largest stage cost (the sum of its blocks' costs) over
// all cuts into `num_stages` non-empty contiguous stages (dynamic programming, exact).
// Among equally good cuts, the one with the longest last stage (then recursively for the
// stages before it), so that the result is deterministic.
// InvalidArgumentError when num_stages < 1, num_stages > costs.size(), or a cost is
// negative or not finite.
absl::StatusOr<std::vector<int64_t>> BalancedBoundaries(const std::vector<double>& costs,
                                                        int num_stages);

// The cost of each stage of a partition: sums of `costs` over the stages' ranges.
std::vector<double> StageCosts(const std::vector<double>& costs,
                               const std::vector<int64_t>& boundaries);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_PARTITION_H_
