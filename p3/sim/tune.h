// Choosing the slice size and the credit from predicted throughput: a grid of candidate
// (slice_params, credit_bytes) points, a predictor of samples per second for each (the
// simulator, Simulate(), or anything else), and the choice of the best. Item 4 of
// issue 15: launch_cluster runs it before any process starts when a config asks for
// scheduling.slice_params = 0 or scheduling.credit_bytes = -1 (tools/launcher/tuning.h;
// docs/simulator.md, "Automatic slice size and credit").
//
// Ties: every candidate predicted within `tie_tolerance` (relative, default 1 %) of the
// best one counts as a tie, and among ties the one nearest the defaults wins: the
// smallest |log(slice_params / 40000)|, then the smallest credit, then the smaller slice.
// The simulator's error against measurements is several percent
// (docs/results/simulator/simulator.md), so a gain below 1 % is no reason to leave the default that
// the measurements were made with.
//
// Example:
//   std::vector<TuningPoint> grid = TuningGrid(/*slice=*/true, /*credit=*/false, 40000, 0);
//   absl::StatusOr<TuningChoice> choice = ChooseTuningPoint(grid,
//       [&](const TuningPoint& p) { return PredictSamplesPerSecond(base_options, p); });
//   // choice->candidates[choice->chosen].point.slice_params
//
// Pure functions (the predictor aside); thread-compatible.
#ifndef P3_P3_SIM_TUNE_H_
#define P3_P3_SIM_TUNE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "p3/core/mode.h"
#include "p3/sim/simulator.h"

namespace p3::sim {

// The grids searched: slice sizes from 10 k to 1 M parameters (issue 15's range,
// doubling), and credits 0 (one message at a time) to 16 MiB.
inline constexpr int64_t kSliceGrid[] = {10000,  20000,  40000,  80000,
                                         160000, 320000, 640000, 1000000};
inline constexpr int64_t kCreditGrid[] = {0, int64_t{1} << 20, int64_t{4} << 20,
                                          int64_t{16} << 20};
// Predictions within this fraction of the best are ties (see above). Default: 1 %.
inline constexpr double kTuningTieTolerance = 0.01;

struct TuningPoint {
  int64_t slice_params = kDefaultSliceParams;
  int64_t credit_bytes = 0;
};

struct TuningCandidate {
  TuningPoint point;
  bool ok = false;                 // the predictor gave a number
  double samples_per_second = 0;   // when ok
  std::string error;               // when not ok: the predictor's error
};

struct TuningChoice {
  // Every point of the grid in the grid's order, with its prediction or error.
  std::vector<TuningCandidate> candidates;
  // Index in `candidates` of the choice.
  int chosen = -1;
  // The best prediction (candidates[best]); chosen differs from it only by a tie.
  int best = -1;
};

// The grid: the product of kSliceGrid (when search_slice, else {slice_params}) and
// kCreditGrid (when search_credit, else {credit_bytes}), slices outermost.
// Which automatic knobs a search can move under `mode` (allreduce: the DDP peer): none
// for `local` or all-reduce (nothing goes through the send queues), the slice size only
// in modes that slice (whole-tensor modes split at split_threshold instead).
struct SearchedKnobs {
  bool slice = false;
  bool credit = false;
};
SearchedKnobs KnobsToSearch(bool slice_auto, bool credit_auto, Mode mode, bool allreduce = false);

std::vector<TuningPoint> TuningGrid(bool search_slice, bool search_credit, int64_t slice_params,
                                    int64_t credit_bytes);

using Predictor = std::function<absl::StatusOr<double>(const TuningPoint&)>;

// Runs `predict` on every point of `grid` (in order) and chooses. InvalidArgument for an
// empty grid; FailedPrecondition naming the first error when no point could be
// predicted. A point whose prediction fails, or is not a finite number >= 0, is kept in
// the candidates with its error and never chosen.
absl::StatusOr<TuningChoice> ChooseTuningPoint(const std::vector<TuningPoint>& grid,
                                               const Predictor& predict,
                                               double tie_tolerance = kTuningTieTolerance);

// The choice among candidates already predicted (ChooseTuningPoint without running the
// predictor); the same errors.
absl::StatusOr<TuningChoice> ChooseAmong(std::vector<TuningCandidate> candidates,
                                         double tie_tolerance = kTuningTieTolerance);

// Simulate(base) with the point's slice_params and credit_bytes: its samples_per_second.
absl::StatusOr<double> PredictSamplesPerSecond(const SimOptions& base, const TuningPoint& point);

}  // namespace p3::sim

#endif  // P3_P3_SIM_TUNE_H_
