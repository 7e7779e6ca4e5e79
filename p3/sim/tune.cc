#include "p3/sim/tune.h"

#include <cmath>
#include <iterator>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace p3::sim {

SearchedKnobs KnobsToSearch(bool slice_auto, bool credit_auto, Mode mode, bool allreduce) {
  if (allreduce || mode == Mode::kLocal) return {};
  return {.slice = slice_auto && TraitsOf(mode).sliced, .credit = credit_auto};
}

std::vector<TuningPoint> TuningGrid(bool search_slice, bool search_credit, int64_t slice_params,
                                    int64_t credit_bytes) {
  std::vector<int64_t> slices;
  if (search_slice) {
    slices.assign(std::begin(kSliceGrid), std::end(kSliceGrid));
  } else {
    slices = {slice_params};
  }
  std::vector<int64_t> credits;
  if (search_credit) {
    credits.assign(std::begin(kCreditGrid), std::end(kCreditGrid));
  } else {
    credits = {credit_bytes};
  }
  std::vector<TuningPoint> grid;
  for (int64_t slice : slices) {
    for (int64_t credit : credits) grid.push_back({slice, credit});
  }
  return grid;
}

absl::StatusOr<TuningChoice> ChooseAmong(std::vector<TuningCandidate> candidates,
                                         double tie_tolerance) {
  if (candidates.empty()) {
    return absl::InvalidArgumentError("no candidate to choose from: the grid is empty");
  }
  TuningChoice choice;
  choice.candidates = std::move(candidates);
  const std::vector<TuningCandidate>& c = choice.candidates;
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].ok) continue;
    if (choice.best < 0 || c[i].samples_per_second > c[choice.best].samples_per_second) {
      choice.best = static_cast<int>(i);
    }
  }
  if (choice.best < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no candidate could be predicted; the first (slice_params ",
                     c[0].point.slice_params, ", credit_bytes ", c[0].point.credit_bytes,
                     "): ", c[0].error));
  }
  const double floor = c[choice.best].samples_per_second * (1.0 - tie_tolerance);
  // Nearest the defaults first: slice size on a log scale, then credit, then slice.
  auto distance = [](const TuningPoint& p) {
    return std::make_tuple(
        std::fabs(std::log(static_cast<double>(p.slice_params) /
                           static_cast<double>(kDefaultSliceParams))),
        p.credit_bytes, p.slice_params);
  };
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].ok || c[i].samples_per_second < floor) continue;
    if (choice.chosen < 0 || distance(c[i].point) < distance(c[choice.chosen].point)) {
      choice.chosen = static_cast<int>(i);
    }
  }
  return choice;
}

absl::StatusOr<TuningChoice> ChooseTuningPoint(const std::vector<TuningPoint>& grid,
                                               const Predictor& predict,
                                               double tie_tolerance) {
  std::vector<TuningCandidate> candidates;
  for (const TuningPoint& point : grid) {
    TuningCandidate candidate;
    candidate.point = point;
    absl::StatusOr<double> predicted = predict(point);
    if (!predicted.ok()) {
      candidate.error = std::string(predicted.status().message());
    } else if (!std::isfinite(*predicted) || *predicted < 0) {
      candidate.error = absl::StrCat("the prediction ", *predicted, " is not a number >= 0");
    } else {
      candidate.ok = true;
      candidate.samples_per_second = *predicted;
    }
    candidates.push_back(std::move(candidate));
  }
  return ChooseAmong(std::move(candidates), tie_tolerance);
}

absl::StatusOr<double> PredictSamplesPerSecond(const SimOptions& base, const TuningPoint& point) {
  SimOptions options = base;
  options.slice_params = point.slice_params;
  options.credit_bytes = point.credit_bytes;
  options.trace = false;
  absl::StatusOr<SimResult> result = Simulate(options);
  if (!result.ok()) return result.status();
  return result->samples_per_second;
}

}  // namespace p3::sim
