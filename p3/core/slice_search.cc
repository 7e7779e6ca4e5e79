#include "p3/core/slice_search.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace p3 {
namespace {

constexpr int64_t kGridMin = 10000;
constexpr int64_t kGridMax = 1000000;

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
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
  for (int64_t size : {start, clamp(2 * start), clamp(4 * start), clamp(start / 2)}) {
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
  const int k = std::max(1, options_.measure_iterations);
  const SliceSearchCandidateReport& now = report_.candidates[timing_];
  const int timed = static_cast<int>(now.seconds.size());
  if (timed >= k) {  // the last candidate is timed
    Decide(iteration);
    return Before(iteration);
  }
  // A re-plan asked for now takes effect at iteration + 1, so the next candidate is asked
  // for before the current one's last timed iteration, which still runs on its plan.
  if (timed == k - 1 && iteration >= measure_from_ && !next_from_.has_value() &&
      timing_ + 1 < options_.candidates.size()) {
    next_from_ = iteration + 1;
    return options_.candidates[timing_ + 1];
  }
  return std::nullopt;
}

void SliceSearch::After(int64_t iteration, double seconds) {
  if (report_.done || iteration < measure_from_) return;
  const int k = std::max(1, options_.measure_iterations);
  SliceSearchCandidateReport& now = report_.candidates[timing_];
  if (static_cast<int>(now.seconds.size()) >= k) return;
  now.seconds.push_back(seconds);
  now.iterations.push_back(iteration);
  now.mean_seconds = Mean(now.seconds);
  if (static_cast<int>(now.seconds.size()) == k && next_from_.has_value()) {
    ++timing_;
    report_.candidates.push_back(
        {.slice_params = options_.candidates[timing_], .from_iteration = *next_from_});
    // The iteration where the plan changes carries both: left out.
    measure_from_ = *next_from_ + 1;
    next_from_.reset();
  }
}

void SliceSearch::Decide(int64_t iteration) {
  const SliceSearchCandidateReport& start = report_.candidates[0];
  const double margin = std::max(0.0, options_.min_gain);
  size_t best = 0;
  for (size_t i = 1; i < report_.candidates.size(); ++i) {
    if (report_.candidates[i].mean_seconds < report_.candidates[best].mean_seconds) best = i;
  }
  const SliceSearchCandidateReport& b = report_.candidates[best];
  const double gain = start.mean_seconds > 0 ? 1 - b.mean_seconds / start.mean_seconds : 0;
  size_t chosen = 0;
  if (best == 0) {
    report_.reason = absl::StrCat(start.slice_params, " is the fastest");
  } else if (gain > margin) {
    chosen = best;
    report_.reason = absl::StrFormat("%d is %.1f %% faster than %d, beyond the margin %.1f %%",
                                     b.slice_params, 100 * gain, start.slice_params, 100 * margin);
  } else {
    report_.reason = absl::StrFormat("%d is %.1f %% faster than %d, within the margin %.1f %%",
                                     b.slice_params, 100 * gain, start.slice_params, 100 * margin);
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
