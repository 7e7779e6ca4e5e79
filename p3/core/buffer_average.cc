#include "p3/core/buffer_average.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "p3/core/membership.h"

namespace p3 {
namespace {

std::vector<int> Ranks(int n) {
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(r);
  return ranks;
}

}  // namespace

BufferAverage::BufferAverage(int num_workers)
    : num_workers_(num_workers),
      all_ranks_(Ranks(num_workers)),
      contributions_(static_cast<size_t>(num_workers)),
      arrived_(static_cast<size_t>(num_workers), false) {}

absl::StatusOr<BufferAverage::Mean> BufferAverage::Add(int rank, uint64_t round,
                                                       const float* values, int64_t n) {
  return Add(rank, round, values, n, all_ranks_);
}

absl::StatusOr<BufferAverage::Mean> BufferAverage::Add(int rank, uint64_t round,
                                                       const float* values, int64_t n,
                                                       const std::vector<int>& present) {
  if (rank < 0 || rank >= num_workers_) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffers: rank ", rank, " is out of range for ", num_workers_, " workers"));
  }
  if (n < 0 || (n > 0 && values == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("buffers: ", n, " values"));
  }
  absl::MutexLock lock(&mu_);
  if (!open_ && completed_ && round == *completed_) {
    if (static_cast<int64_t>(last_mean_->size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffers of worker ", rank, " for round ", round, " have ", n,
                       " values, the other workers' ", last_mean_->size()));
    }
    return Mean{.values = last_mean_, .for_everyone = false};
  }
  if (open_ ? round != *open_ : (completed_ && round < *completed_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "buffers of worker ", rank, " for round ", round, ", but ",
        open_ ? absl::StrCat("round ", *open_, " is open")
              : absl::StrCat("round ", *completed_, " has completed")));
  }
  if (!std::binary_search(present.begin(), present.end(), rank)) {
    return absl::InvalidArgumentError(absl::StrCat("buffers of worker ", rank, " for round ",
                                                   round, ", which only workers ",
                                                   DescribeRanks(present), " take part in"));
  }
  if (open_ && present != present_) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffers of worker ", rank, " for round ", round, " with workers ",
                     DescribeRanks(present), ", but the round is open for workers ",
                     DescribeRanks(present_)));
  }
  for (int r : present) {
    if (r < 0 || r >= num_workers_) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffers: rank ", r, " is out of range for ", num_workers_, " workers"));
    }
  }
  if (length_ >= 0 && n != length_) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffers of worker ", rank, " for round ", round, " have ", n,
                     " values, the other workers' ", length_));
  }
  open_ = round;
  length_ = n;
  present_ = present;
  std::vector<float>& mine = contributions_[static_cast<size_t>(rank)];
  // memcpy: `values` may point into a message, with no alignment assumed.
  mine.resize(static_cast<size_t>(n));
  if (n > 0) std::memcpy(mine.data(), values, static_cast<size_t>(n) * sizeof(float));
  if (!arrived_[static_cast<size_t>(rank)]) {
    arrived_[static_cast<size_t>(rank)] = true;
    ++arrived_count_;
  }
  if (arrived_count_ < static_cast<int>(present.size())) return Mean{};
  auto mean = std::make_shared<std::vector<float>>(static_cast<size_t>(n), 0.0f);
  for (int r : present) {  // rank order
    const std::vector<float>& c = contributions_[static_cast<size_t>(r)];
    for (int64_t i = 0; i < n; ++i) (*mean)[static_cast<size_t>(i)] += c[static_cast<size_t>(i)];
  }
  const float workers = static_cast<float>(present.size());
  for (float& v : *mean) v /= workers;
  for (std::vector<float>& c : contributions_) c.clear();
  arrived_.assign(arrived_.size(), false);
  arrived_count_ = 0;
  length_ = -1;
  completed_ = round;
  open_.reset();
  last_mean_ = mean;
  return Mean{.values = std::move(mean), .for_everyone = true};
}

}  // namespace p3
