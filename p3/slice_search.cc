#include "p3/slice_search.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace p3 {
namespace {

constexpr int64_t kGridMin = 10000;
constexpr int64_t kGridMax = 1000000;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int64_t SliceSearchOwnerParams(int64_t start) {
  return std::max(start, std::min<int64_t>(4 * start, kGridMax));
}

std::vector<int64_t> SliceSearchCandidates(int64_t start, int64_t owner) {
  const bool in_grid = start >= kGridMin && start <= kGridMax;
  auto clamp = [&](int64_t size) {
    if (in_grid) size = std::clamp(size, kGridMin, kGridMax);
    return std::clamp<int64_t>(size, 1, std::max<int64_t>(1, owner));
  };
  std::vector<int64_t> out;
  for (int64_t size : {start, clamp(4 * start), clamp(start / 4)}) {
    if (std::find(out.begin(), out.end(), size) == out.end()) out.push_back(size);
  }
  return out;
}

SliceSearch::SliceSearch(const SliceSearchOptions& options, int64_t first_iteration)
    : options_(options) {
  if (!options_.candidates.empty()) {
    report_.candidates.push_back(
        {.slice_params = options_.candidates[0], .from_iteration = first_iteration});
  } else {
    report_.done = true;
    report_.reason = "no candidates";
  }
  measure_from_ = first_iteration + std::max(0, options_.warmup_iterations);
  report_.done_iteration = first_iteration;
}

std::optional<int64_t> SliceSearch::Before(int64_t iteration) {
  if (report_.done) {
    if (!final_.has_value()) return std::nullopt;
    const int64_t size = *final_;
    final_.reset();
    report_.done_iteration = iteration + 1;
    return size;
  }
  const SliceSearchCandidateReport& now = report_.candidates[timing_];
  if (static_cast<int>(now.seconds.size()) < std::max(1, options_.measure_iterations)) {
    return std::nullopt;
  }
  if (timing_ + 1 < options_.candidates.size()) {
    ++timing_;
    const int64_t size = options_.candidates[timing_];
    report_.candidates.push_back({.slice_params = size, .from_iteration = iteration + 1});
    // The iteration where the plan changes carries both: left out.
    measure_from_ = iteration + 2;
    return size;
  }
  Decide(iteration);
  return Before(iteration);
}

void SliceSearch::After(int64_t iteration, double seconds) {
  if (report_.done || iteration < measure_from_) return;
  SliceSearchCandidateReport& now = report_.candidates[timing_];
  if (static_cast<int>(now.seconds.size()) >= std::max(1, options_.measure_iterations)) return;
  now.seconds.push_back(seconds);
  now.iterations.push_back(iteration);
  now.median_seconds = Median(now.seconds);
}

void SliceSearch::Decide(int64_t iteration) {
  const SliceSearchCandidateReport& start = report_.candidates[0];
  const auto [lo, hi] = std::minmax_element(start.seconds.begin(), start.seconds.end());
  const double spread = start.median_seconds > 0 ? (*hi - *lo) / (2 * start.median_seconds) : 0;
  const double margin = std::max(options_.min_gain, spread);
  size_t best = 0;
  for (size_t i = 1; i < report_.candidates.size(); ++i) {
    if (report_.candidates[i].median_seconds < report_.candidates[best].median_seconds) best = i;
  }
  const SliceSearchCandidateReport& b = report_.candidates[best];
  const double gain = start.median_seconds > 0 ? 1 - b.median_seconds / start.median_seconds : 0;
  size_t chosen = 0;
  if (best == 0) {
    report_.reason = absl::StrCat(start.slice_params, " is the fastest");
  } else if (gain > margin) {
    chosen = best;
    report_.reason = absl::StrFormat("%d is %.1f %% faster than %d, beyond the margin %.1f %%",
                                     b.slice_params, 100 * gain, start.slice_params, 100 * margin);
  } else {
    report_.reason = absl::StrFormat(
        "%d is %.1f %% faster than %d, within the margin %.1f %% (the start's spread or %.0f %%)",
        b.slice_params, 100 * gain, start.slice_params, 100 * margin, 100 * options_.min_gain);
  }
  report_.chosen = report_.candidates[chosen].slice_params;
  report_.done = true;
  report_.done_iteration = iteration;
  if (chosen != timing_) final_ = report_.chosen;
}

int64_t SliceSearch::IterationsNeeded(const SliceSearchOptions& options) {
  SliceSearch search(options, 0);
  int64_t it = 0;
  // Every candidate timed as fast as the start: ends on the start, re-planned back to it.
  for (; it < 100000; ++it) {
    search.Before(it);
    if (search.done() && !search.final_.has_value()) break;
    search.After(it, 1.0);
  }
  return search.report().done_iteration;
}

}  // namespace p3
