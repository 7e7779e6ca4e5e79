#include "p3/slice_search.h"

#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <vector>

namespace p3 {
namespace {

struct Replan {
  int64_t before_iteration;
  int64_t slice_params;
};

// Runs a search over `iterations` where an iteration in plan s takes seconds(s, it), the
// plan changing one iteration after each request (as the protocol does). Returns the
// requests made.
std::vector<Replan> Run(SliceSearch& search, int64_t first, int64_t iterations, int64_t start,
                        const std::function<double(int64_t, int64_t)>& seconds) {
  std::vector<Replan> requests;
  int64_t plan = start;
  std::optional<std::pair<int64_t, int64_t>> pending;  // (from, size)
  for (int64_t it = first; it < first + iterations; ++it) {
    if (pending && pending->first == it) {
      plan = pending->second;
      pending.reset();
    }
    if (std::optional<int64_t> size = search.Before(it)) {
      CATCH_REQUIRE_FALSE(pending.has_value());
      requests.push_back({it, *size});
      pending = std::make_pair(it + 1, *size);
    }
    search.After(it, seconds(plan, it));
  }
  return requests;
}

CATCH_TEST_CASE("the candidates are the start, four times it and a quarter, within the stripe and the grid") {
  CATCH_CHECK(SliceSearchCandidates(80000, 320000) == std::vector<int64_t>{80000, 320000, 20000});
  CATCH_CHECK(SliceSearchCandidates(40000, 80000) == std::vector<int64_t>{40000, 80000, 10000});
  CATCH_CHECK(SliceSearchCandidates(10000, 40000) == std::vector<int64_t>{10000, 40000});
  CATCH_CHECK(SliceSearchCandidates(1000000, 1000000) == std::vector<int64_t>{1000000, 250000});
  CATCH_CHECK(SliceSearchCandidates(100, 400) == std::vector<int64_t>{100, 400, 25});
  CATCH_CHECK(SliceSearchOwnerParams(80000) == 320000);
  CATCH_CHECK(SliceSearchOwnerParams(500000) == 1000000);
  CATCH_CHECK(SliceSearchOwnerParams(2000000) == 2000000);
}

CATCH_TEST_CASE("a clearly faster candidate is chosen and every process switches to it") {
  SliceSearch search({.candidates = {40000, 160000, 10000}}, 0);
  // 160000 is 10 % faster; noise-free.
  const std::map<int64_t, double> cost = {{40000, 1.0}, {160000, 0.9}, {10000, 1.2}};
  const auto requests = Run(search, 0, 40, 40000, [&](int64_t s, int64_t) { return cost.at(s); });
  CATCH_REQUIRE(search.done());
  CATCH_CHECK(search.report().chosen == 160000);
  // Timed: 40000 at 2,3,4; 160000 from 6 (5 switches) at 7,8,9; 10000 from 11 at 12,13,14;
  // back to 160000 from 16.
  CATCH_REQUIRE(requests.size() == 3);
  CATCH_CHECK(requests[0].before_iteration == 5);
  CATCH_CHECK(requests[0].slice_params == 160000);
  CATCH_CHECK(requests[1].slice_params == 10000);
  CATCH_CHECK(requests[2].slice_params == 160000);
  CATCH_CHECK(search.report().done_iteration == 16);
  CATCH_CHECK(SliceSearch::IterationsNeeded({.candidates = {40000, 160000, 10000}}) == 16);
  const auto& timed = search.report().candidates;
  CATCH_REQUIRE(timed.size() == 3);
  CATCH_CHECK(timed[0].iterations == std::vector<int64_t>{2, 3, 4});
  CATCH_CHECK(timed[1].from_iteration == 6);
  CATCH_CHECK(timed[1].iterations == std::vector<int64_t>{7, 8, 9});  // 6 mixes two plans
  CATCH_CHECK(timed[2].iterations == std::vector<int64_t>{12, 13, 14});
  CATCH_CHECK(timed[1].median_seconds == Approx(0.9));
}

CATCH_TEST_CASE("a gain within the start's own spread keeps the start") {
  SliceSearch search({.candidates = {80000, 320000, 20000}}, 0);
  // The start varies by +-5 %; 320000 is 3 % faster: noise, not a gain.
  const auto requests = Run(search, 0, 40, 80000, [](int64_t s, int64_t it) {
    if (s == 80000) return it % 3 == 0 ? 0.95 : (it % 3 == 1 ? 1.0 : 1.05);
    return s == 320000 ? 0.97 : 1.1;
  });
  CATCH_REQUIRE(search.done());
  CATCH_CHECK(search.report().chosen == 80000);
  CATCH_CHECK(search.report().reason.find("within the margin") != std::string::npos);
  CATCH_REQUIRE(requests.size() == 3);
  CATCH_CHECK(requests.back().slice_params == 80000);  // back to the start
}

CATCH_TEST_CASE("when the last candidate timed wins, no further re-plan is needed") {
  SliceSearch search({.candidates = {40000, 160000, 10000}}, 100);
  const auto requests = Run(search, 100, 40, 40000, [](int64_t s, int64_t) {
    return s == 10000 ? 0.8 : 1.0;
  });
  CATCH_CHECK(search.report().chosen == 10000);
  CATCH_CHECK(requests.size() == 2);
  CATCH_CHECK(search.report().candidates[0].iterations.front() == 102);  // warm-up from 100
}

CATCH_TEST_CASE("one candidate is no search") {
  SliceSearch search({.candidates = {40000}}, 0);
  const auto requests = Run(search, 0, 20, 40000, [](int64_t, int64_t) { return 1.0; });
  CATCH_CHECK(requests.empty());
  CATCH_CHECK(search.done());
  CATCH_CHECK(search.report().chosen == 40000);
}

}  // namespace
}  // namespace p3
