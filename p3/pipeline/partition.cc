#include "p3/pipeline/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace p3::pipeline {

absl::Status ValidateBoundaries(const std::vector<int64_t>& boundaries, int64_t num_blocks) {
  if (static_cast<int64_t>(boundaries.size()) + 1 > num_blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        boundaries.size() + 1, " stages need at least as many blocks; the model has ", num_blocks));
  }
  int64_t previous = 0;
  for (size_t i = 0; i < boundaries.size(); ++i) {
    if (boundaries[i] <= previous || boundaries[i] >= num_blocks) {
      return absl::InvalidArgumentError(
          absl::StrCat("boundary ", i, " (first block of stage ", i + 1, ") is ", boundaries[i],
                       "; boundaries must increase strictly within 1..", num_blocks - 1,
                       " so that every stage has a block"));
    }
    previous = boundaries[i];
  }
  return absl::OkStatus();
}

std::vector<StageRange> StageRanges(const std::vector<int64_t>& boundaries, int64_t num_blocks) {
  std::vector<StageRange> ranges;
  int64_t begin = 0;
  for (int64_t boundary : boundaries) {
    ranges.push_back({begin, boundary});
    begin = boundary;
  }
  ranges.push_back({begin, num_blocks});
  return ranges;
}

absl::StatusOr<std::vector<int64_t>> BalancedBoundaries(const std::vector<double>& costs,
                                                        int num_stages) {
  const int64_t n = static_cast<int64_t>(costs.size());
  if (num_stages < 1 || num_stages > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot cut ", n, " blocks into ", num_stages, " non-empty stages"));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!(costs[i] >= 0) || !std::isfinite(costs[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("block ", i, " has cost ", costs[i], "; costs must be finite and >= 0"));
    }
  }
  std::vector<double> prefix(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[s][j]: the smallest largest-stage cost of blocks [0, j) in s stages;
  // cut[s][j]: where its last stage begins.
  std::vector<std::vector<double>> best(num_stages + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int64_t>> cut(num_stages + 1, std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= num_stages; ++s) {
    for (int64_t j = s; j <= n; ++j) {
      // The last stage is [i, j); the strict '<' keeps the smallest i among ties (the
      // longest last stage), so that ties are resolved the same way every time.
      for (int64_t i = s - 1; i < j; ++i) {
        const double value = std::max(best[s - 1][i], prefix[j] - prefix[i]);
        if (value < best[s][j]) {
          best[s][j] = value;
          cut[s][j] = i;
        }
      }
    }
  }
  std::vector<int64_t> boundaries(num_stages - 1);
  int64_t end = n;
  for (int s = num_stages; s >= 2; --s) {
    end = cut[s][end];
    boundaries[s - 2] = end;
  }
  return boundaries;
}

std::vector<double> StageCosts(const std::vector<double>& costs,
                               const std::vector<int64_t>& boundaries) {
  std::vector<double> out;
  for (const StageRange& range : StageRanges(boundaries, static_cast<int64_t>(costs.size()))) {
    double sum = 0;
    for (int64_t i = range.begin; i < range.end; ++i) sum += costs[i];
    out.push_back(sum);
  }
  return out;
}

}  // namespace p3::pipeline
