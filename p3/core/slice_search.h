// The online search of the slice size (scheduling.online_search; docs/simulator.md,
// "Automatic slice size and credit"): rank 0 times real iterations with the slice size it
// starts with, then with each other candidate in turn, and keeps the fastest. Each switch
// is a re-plan (Worker::RequestReplan), which leaves training bit for bit unchanged.
//
// Transport-free: the trainer asks before every iteration whether to re-plan, and reports
// every iteration's wall time after it. A re-plan requested before iteration i takes effect
// at iteration i + 1 (docs/protocol.md, "Re-plan"), so the next candidate is asked for
// before the current one's last timed iteration; the iteration where a plan takes effect
// mixes the two plans and is not measured, nor are the run's first `warmup_iterations`.
// With the defaults and 4 candidates the final plan is in effect from iteration 18.
//
// The decision: the mean time of `measure_iterations` consecutive iterations per candidate,
// i.e. its throughput over that window. Not the median: on this project's hosts one
// iteration's time is anti-correlated with the next (lag-1 correlation -0.1 to -0.6, a
// long wait for values is followed by a short one), so a window's mean is far steadier than
// its single iterations (docs/simulator.md, "Online search and re-plan"). Another candidate
// replaces the starting size only if its mean is shorter by more than `min_gain`, so that
// noise does not move the plan away from a start that is as good.
//
// Example:
//   SliceSearch search({.candidates = SliceSearchCandidates(80000, 320000)}, first_iteration);
//   for (int64_t it = first; it < iterations; ++it) {
//     if (std::optional<int64_t> size = search.Before(it)) worker->RequestReplan(*size);
//     const double seconds = RunIteration(it);
//     search.After(it, seconds);
//   }
//   search.report();   // what was measured and chosen
//
// Not thread-safe: one training thread.
#ifndef P3_P3_CORE_SLICE_SEARCH_H_
#define P3_P3_CORE_SLICE_SEARCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace p3 {

struct SliceSearchOptions {
  // Slice sizes to time, the first being the plan's at the start; at least one, each
  // >= 1, no repeats. Required.
  std::vector<int64_t> candidates;
  // Iterations of the run left out at the start (start-up, first allocations). Default: 2.
  int warmup_iterations = 2;
  // Iterations timed per candidate. Default: 3. Must be >= 1.
  int measure_iterations = 3;
  // Least relative gain over the starting size for another to replace it. Default: 0.02.
  double min_gain = 0.02;
};

// The candidates for a run that starts at `start` within ownership stripes of `owner`
// parameters (owner >= start), in the order timed: the start, 2x, 4x and half the start,
// each clamped to [1, owner] and to [10,000, 1,000,000] where the start lies in that
// range, without repeats.
std::vector<int64_t> SliceSearchCandidates(int64_t start, int64_t owner);

// The ownership stripe a search from `start` needs: 4x the start, at most 1,000,000 and at
// least the start.
int64_t SliceSearchOwnerParams(int64_t start);

struct SliceSearchCandidateReport {
  int64_t slice_params = 0;
  int64_t from_iteration = 0;            // where this plan took effect
  std::vector<double> seconds;           // the iterations timed
  std::vector<int64_t> iterations;       // which they were
  double mean_seconds = 0;
};

struct SliceSearchReport {
  std::vector<SliceSearchCandidateReport> candidates;  // in the order timed
  int64_t chosen = 0;
  // The iteration from which every process uses `chosen`: the end of the search.
  int64_t done_iteration = 0;
  // Why `chosen` (e.g. "80000 is 6.1 % faster than 40000, beyond the margin 2.0 %").
  std::string reason;
  bool done = false;
};

class SliceSearch {
 public:
  // `first_iteration`: the run's first (a resumed run's is not 0).
  SliceSearch(const SliceSearchOptions& options, int64_t first_iteration);

  // Before iteration `iteration`: the slice size to re-plan to now (effective at
  // iteration + 1), or none.
  std::optional<int64_t> Before(int64_t iteration);
  // Iteration `iteration` took `seconds`.
  void After(int64_t iteration, double seconds);

  bool done() const { return report_.done; }
  const SliceSearchReport& report() const { return report_; }

  // How many iterations a search with `options` takes from the run's start to the
  // iteration where the final plan is in effect, at the most.
  static int64_t IterationsNeeded(const SliceSearchOptions& options);

 private:
  void Decide(int64_t iteration);

  const SliceSearchOptions options_;
  SliceSearchReport report_;
  size_t timing_ = 0;             // index in report_.candidates of the one being timed
  int64_t measure_from_ = 0;      // first iteration that counts for it
  // Where the next candidate's plan takes effect, once asked for.
  std::optional<int64_t> next_from_;
  std::optional<int64_t> final_;  // the choice, once made and not yet requested
};

}  // namespace p3

#endif  // P3_P3_CORE_SLICE_SEARCH_H_
