#include "p3/sim/tune.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"

namespace p3::sim {
namespace {

// A predictor from a table: slice size -> samples/s; a missing size is an error.
Predictor Table(std::map<int64_t, double> table, std::vector<TuningPoint>* asked = nullptr) {
  return [table = std::move(table), asked](const TuningPoint& p) -> absl::StatusOr<double> {
    if (asked != nullptr) asked->push_back(p);
    auto it = table.find(p.slice_params);
    if (it == table.end()) return absl::InternalError("no such point");
    return it->second;
  };
}

std::vector<TuningPoint> Slices(const std::vector<int64_t>& slices) {
  std::vector<TuningPoint> grid;
  for (int64_t s : slices) grid.push_back({s, 0});
  return grid;
}

CATCH_TEST_CASE("the grids: slice sizes 10k .. 1M, credits 0 .. 16 MiB, slices outermost") {
  const std::vector<TuningPoint> slices = TuningGrid(true, false, 40000, 123);
  CATCH_REQUIRE(slices.size() == 8);
  CATCH_CHECK(slices.front().slice_params == 10000);
  CATCH_CHECK(slices.back().slice_params == 1000000);
  for (const TuningPoint& p : slices) CATCH_CHECK(p.credit_bytes == 123);  // not searched

  const std::vector<TuningPoint> credits = TuningGrid(false, true, 80000, 0);
  CATCH_REQUIRE(credits.size() == 4);
  CATCH_CHECK(credits[0].credit_bytes == 0);
  CATCH_CHECK(credits[3].credit_bytes == 16 << 20);
  for (const TuningPoint& p : credits) CATCH_CHECK(p.slice_params == 80000);

  const std::vector<TuningPoint> both = TuningGrid(true, true, 40000, 0);
  CATCH_REQUIRE(both.size() == 32);
  CATCH_CHECK(both[0].slice_params == 10000);
  CATCH_CHECK(both[1].slice_params == 10000);
  CATCH_CHECK(both[1].credit_bytes == 1 << 20);
  CATCH_CHECK(both[4].slice_params == 20000);

  CATCH_CHECK(TuningGrid(false, false, 5, 7).size() == 1);
}

CATCH_TEST_CASE("the best predicted point is chosen, and every point is kept with its prediction") {
  std::vector<TuningPoint> asked;
  absl::StatusOr<TuningChoice> choice = ChooseTuningPoint(
      Slices({10000, 40000, 160000, 640000}),
      Table({{10000, 20.0}, {40000, 25.0}, {160000, 30.0}, {640000, 28.0}}, &asked));
  CATCH_REQUIRE(choice.ok());
  CATCH_CHECK(asked.size() == 4);  // each point predicted once, in order
  CATCH_CHECK(asked[2].slice_params == 160000);
  CATCH_REQUIRE(choice->candidates.size() == 4);
  CATCH_CHECK(choice->chosen == 2);
  CATCH_CHECK(choice->best == 2);
  CATCH_CHECK(choice->candidates[2].point.slice_params == 160000);
  CATCH_CHECK(choice->candidates[0].ok);
  CATCH_CHECK(choice->candidates[0].samples_per_second == 20.0);
}

CATCH_TEST_CASE("ties go to the point nearest the default 40000, then the smaller credit and slice") {
  // An exact tie between 20000 and 80000: both are a factor 2 from 40000; the smaller wins.
  absl::StatusOr<TuningChoice> choice =
      ChooseTuningPoint(Slices({10000, 20000, 80000}), Table({{10000, 1}, {20000, 5}, {80000, 5}}));
  CATCH_REQUIRE(choice.ok());
  CATCH_CHECK(choice->candidates[choice->chosen].point.slice_params == 20000);

  // Within the tolerance (1 %) of the best, the default wins over a marginally better point.
  choice = ChooseTuningPoint(Slices({40000, 640000}), Table({{40000, 99.5}, {640000, 100.0}}));
  CATCH_REQUIRE(choice.ok());
  CATCH_CHECK(choice->candidates[choice->chosen].point.slice_params == 40000);
  CATCH_CHECK(choice->candidates[choice->best].point.slice_params == 640000);

  // Outside it, the better point.
  choice = ChooseTuningPoint(Slices({40000, 640000}), Table({{40000, 98.0}, {640000, 100.0}}));
  CATCH_REQUIRE(choice.ok());
  CATCH_CHECK(choice->candidates[choice->chosen].point.slice_params == 640000);

  // A zero tolerance: exact ties only.
  choice = ChooseTuningPoint(Slices({40000, 640000}), Table({{40000, 99.5}, {640000, 100.0}}),
                             /*tie_tolerance=*/0);
  CATCH_REQUIRE(choice.ok());
  CATCH_CHECK(choice->candidates[choice->chosen].point.slice_params == 640000);

  // Equal predictions over credits (a process with one remote peer): credit 0.
  std::vector<TuningCandidate> flat;
  for (const TuningPoint& p : TuningGrid(false, true, 40000, 0)) {
    flat.push_back({p, true, 10.0, ""});
  }
  std::swap(flat[0], flat[3]);  // the order of the candidates does not matter
  choice = ChooseAmong(flat);
  CATCH_REQUIRE(choice.ok());
  CATCH_CHECK(choice->candidates[choice->chosen].point.credit_bytes == 0);
}

CATCH_TEST_CASE("a search moves only the knobs the mode has: none in local or all-reduce") {
  const SearchedKnobs p3 = KnobsToSearch(true, true, Mode::kP3);
  CATCH_CHECK(p3.slice);
  CATCH_CHECK(p3.credit);
  const SearchedKnobs only_credit = KnobsToSearch(false, true, Mode::kP3);
  CATCH_CHECK(!only_credit.slice);
  CATCH_CHECK(only_credit.credit);
  // Whole tensors: the slice size has no effect, the credit still has.
  const SearchedKnobs baseline = KnobsToSearch(true, true, Mode::kBaseline);
  CATCH_CHECK(!baseline.slice);
  CATCH_CHECK(baseline.credit);
  const SearchedKnobs local = KnobsToSearch(true, true, Mode::kLocal);
  CATCH_CHECK(!local.slice);
  CATCH_CHECK(!local.credit);
  const SearchedKnobs allreduce = KnobsToSearch(true, true, Mode::kP3, /*allreduce=*/true);
  CATCH_CHECK(!allreduce.slice);
  CATCH_CHECK(!allreduce.credit);
}

CATCH_TEST_CASE("an empty grid is refused") {
  absl::StatusOr<TuningChoice> choice = ChooseTuningPoint({}, Table({}));
  CATCH_REQUIRE(!choice.ok());
  CATCH_CHECK(choice.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(absl::StrContains(choice.status().message(), "the grid is empty"));
}

CATCH_TEST_CASE("failed or invalid predictions are kept with their error and never chosen") {
  absl::StatusOr<TuningChoice> choice = ChooseTuningPoint(
      Slices({10000, 40000, 80000, 160000}),
      Table({{10000, std::nan("")}, {80000, -1.0}, {160000, 3.0}}));
  CATCH_REQUIRE(choice.ok());
  CATCH_CHECK(choice->candidates[choice->chosen].point.slice_params == 160000);
  CATCH_CHECK(!choice->candidates[0].ok);
  CATCH_CHECK(absl::StrContains(choice->candidates[0].error, "not a number >= 0"));
  CATCH_CHECK(!choice->candidates[1].ok);
  CATCH_CHECK(choice->candidates[1].error == "no such point");
  CATCH_CHECK(!choice->candidates[2].ok);

  // None predicted: an error naming the first point's.
  choice = ChooseTuningPoint(Slices({10000, 20000}), Table({}));
  CATCH_REQUIRE(!choice.ok());
  CATCH_CHECK(choice.status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(absl::StrContains(choice.status().message(), "slice_params 10000"));
  CATCH_CHECK(absl::StrContains(choice.status().message(), "no such point"));
}

CATCH_TEST_CASE("the simulator as the predictor: one tensor over a 1 Gbit/s link") {
  // Two workers and two servers, one tensor of 4 M parameters and no computation: every
  // slice size gives a prediction, and the choice is one of the grid's.
  SimOptions base;
  base.profile.model = "test";
  base.profile.batch = 1;
  base.profile.blocks.push_back({"b0", 0.0, 0.0, {4000000}});
  base.bandwidth_gbps = 1;
  base.iterations = 4;
  base.warmup_iterations = 1;
  absl::StatusOr<TuningChoice> choice =
      ChooseTuningPoint(TuningGrid(true, false, 40000, 0),
                        [&base](const TuningPoint& p) { return PredictSamplesPerSecond(base, p); });
  CATCH_REQUIRE(choice.ok());
  CATCH_REQUIRE(choice->candidates.size() == 8);
  for (const TuningCandidate& c : choice->candidates) {
    CATCH_CHECK(c.ok);
    CATCH_CHECK(c.samples_per_second > 0);
  }
  // The same options give the same predictions (Simulate is a pure function).
  absl::StatusOr<double> again = PredictSamplesPerSecond(base, choice->candidates[3].point);
  CATCH_REQUIRE(again.ok());
  CATCH_CHECK(*again == choice->candidates[3].samples_per_second);
}

}  // namespace
}  // namespace p3::sim
