#include "models/sampler.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "p3/base/status_macros.h"

namespace p3::models {
namespace {

// Uniform in [0, bound] by rejection: no modulo bias, independent of the standard
// library (std::uniform_int_distribution's algorithm is implementation-defined).
uint64_t UniformAtMost(std::mt19937_64& rng, uint64_t bound) {
  if (bound == UINT64_MAX) return rng();
  const uint64_t range = bound + 1;
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % range + 1) % range;  // multiple-1
  uint64_t r;
  do {
    r = rng();
  } while (r > limit);
  return r % range;
}

}  // namespace

absl::Status ShardedSampler::Validate(const Options& o) {
  if (o.batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size must be >= 1, got ", o.batch_size));
  }
  if (o.num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers must be >= 1, got ", o.num_workers));
  }
  if (o.rank < 0 || o.rank >= o.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank must be in [0, ", o.num_workers, "), got ", o.rank));
  }
  if (o.dataset_size < o.batch_size * o.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset_size ", o.dataset_size, " is smaller than one global batch (batch_size ",
        o.batch_size, " x num_workers ", o.num_workers, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardedSampler> ShardedSampler::Create(const Options& options) {
  P3_RETURN_IF_ERROR(Validate(options));
  return ShardedSampler(options);
}

ShardedSampler::ShardedSampler(const Options& options) : options_(options) {
  if (Validate(options).ok()) {
    iterations_per_epoch_ = options.dataset_size / (options.batch_size * options.num_workers);
  }
}

std::vector<int64_t> ShardedSampler::EpochPermutation(int64_t size, uint64_t seed, int64_t epoch) {
  const uint64_t e = static_cast<uint64_t>(epoch);
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(e), static_cast<uint32_t>(e >> 32)};
  std::mt19937_64 rng(seq);
  std::vector<int64_t> p(size);
  for (int64_t i = 0; i < size; ++i) p[i] = i;
  for (int64_t i = size - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(UniformAtMost(rng, static_cast<uint64_t>(i)));
    std::swap(p[i], p[j]);
  }
  return p;
}

std::vector<int64_t> ShardedSampler::Indices(int64_t iteration) {
  if (iterations_per_epoch_ == 0 || iteration < 0) return {};
  const int64_t epoch = iteration / iterations_per_epoch_;
  const int64_t step = iteration % iterations_per_epoch_;
  if (epoch != cached_epoch_) {
    permutation_ = EpochPermutation(options_.dataset_size, options_.seed, epoch);
    cached_epoch_ = epoch;
  }
  const int64_t begin = (step * options_.num_workers + options_.rank) * options_.batch_size;
  return std::vector<int64_t>(permutation_.begin() + begin,
                              permutation_.begin() + begin + options_.batch_size);
}

}  // namespace p3::models
