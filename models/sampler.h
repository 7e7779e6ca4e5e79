// The order in which data-parallel workers read a data set: deterministic, sharded, and
// identical to what one process with the global batch would read.
//
// Each epoch is a permutation of [0, dataset_size): a Fisher–Yates shuffle driven by
// std::mt19937_64 seeded with std::seed_seq{seed, epoch} (both split in 32-bit halves) and
// an unbiased bounded draw written here, so the order is the same on every platform and
// standard library. The epoch is cut into global batches of batch_size * num_workers
// positions (an incomplete last global batch is dropped); worker `rank` reads positions
// [rank * batch_size, (rank + 1) * batch_size) of each global batch. So concatenating one
// iteration's indices over ranks 0..num_workers-1 gives what a sampler with
// num_workers = 1 and batch_size * num_workers reads at that iteration.
//
// Not thread-safe (it caches the current epoch's permutation); give each thread its own.
//
// Example:
//   P3_ASSIGN_OR_RETURN(p3::models::ShardedSampler sampler,   // p3/base/status_macros.h
//                       p3::models::ShardedSampler::Create({.dataset_size = 60000,
//                           .batch_size = 32, .num_workers = 4, .rank = 1, .seed = 1}));
//   for (int64_t it = 0; it < 3 * sampler.iterations_per_epoch(); ++it) {
//     p3::models::Batch b = dataset->Get(sampler.Indices(it));
//   }
#ifndef P3_MODELS_SAMPLER_H_
#define P3_MODELS_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace p3::models {

struct ShardedSamplerOptions {
  int64_t dataset_size = 0;  // Default: 0 (must be set). Samples [0, dataset_size).
  int64_t batch_size = 32;   // Per worker. Default: 32.
  int64_t num_workers = 1;   // Default: 1.
  int64_t rank = 0;          // This worker, in [0, num_workers). Default: 0.
  uint64_t seed = 1;         // Default: 1.
};

class ShardedSampler {
 public:
  using Options = ShardedSamplerOptions;

  // OK when batch_size >= 1, num_workers >= 1, 0 <= rank < num_workers and the data set
  // holds at least one global batch; InvalidArgumentError naming the field otherwise.
  static absl::Status Validate(const Options& options);

  // A sampler for options from input (config files, flags).
  static absl::StatusOr<ShardedSampler> Create(const Options& options);

  // For options known to be valid; with invalid options Indices() returns {}.
  explicit ShardedSampler(const Options& options);

  // The batch_size data set indices this worker reads at `iteration` (>= 0); iteration
  // i belongs to epoch i / iterations_per_epoch().
  std::vector<int64_t> Indices(int64_t iteration);

  // Global batches per epoch: dataset_size / (batch_size * num_workers).
  int64_t iterations_per_epoch() const { return iterations_per_epoch_; }

  const Options& options() const { return options_; }

  // The permutation of epoch `epoch` of [0, size) under `seed`.
  static std::vector<int64_t> EpochPermutation(int64_t size, uint64_t seed, int64_t epoch);

 private:
  Options options_;
  int64_t iterations_per_epoch_ = 0;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> permutation_;
};

}  // namespace p3::models

#endif  // P3_MODELS_SAMPLER_H_
