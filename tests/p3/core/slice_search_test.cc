#include "p3/core/slice_search.h"

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

CATCH_TEST_CASE("the candidates are the start, twice, four times and half it, within the stripe and the grid") {
  CATCH_CHECK(SliceSearchCandidates(80000, 320000) ==
              std::vector<int64_t>{80000, 160000, 320000, 40000});
  CATCH_CHECK(SliceSearchCandidates(40000, 80000) == std::vector<int64_t>{40000, 80000, 20000});
  CATCH_CHECK(SliceSearchCandidates(10000, 40000) == std::vector<int64_t>{10000, 20000, 40000});
  CATCH_CHECK(SliceSearchCandidates(1000000, 1000000) == std::vector<int64_t>{1000000, 500000});
  CATCH_CHECK(SliceSearchCandidates(100, 400) == std::vector<int64_t>{100, 200, 400, 50});
  CATCH_CHECK(SliceSearchOwnerParams(80000) == 320000);
  CATCH_CHECK(SliceSearchOwnerParams(500000) == 1000000);
  CATCH_CHECK(SliceSearchOwnerParams(2000000) == 2000000);
}

CATCH_TEST_CASE("a clearly faster candidate is chosen and every process switches to it") {
  SliceSearch search({.candidates = {40000, 80000, 160000, 20000}}, 0);
  // 160000 is 10 % faster; noise-free.
  const std::map<int64_t, double> cost = {
      {40000, 1.0}, {80000, 0.95}, {160000, 0.9}, {20000, 1.2}};
  const auto requests = Run(search, 0, 40, 40000, [&](int64_t s, int64_t) { return cost.at(s); });
  CATCH_REQUIRE(search.done());
  CATCH_CHECK(search.report().chosen == 160000);
  // Timed: 40000 at 2,3,4, the next asked for before 4; 80000 from 5 (which mixes two plans)
  // at 6,7,8; 160000 from 9 at 10,11,12; 20000 from 13 at 14,15,16; back to 160000 from 18.
  CATCH_REQUIRE(requests.size() == 4);
  CATCH_CHECK(requests[0].before_iteration == 4);
  CATCH_CHECK(requests[0].slice_params == 80000);
  CATCH_CHECK(requests[1].before_iteration == 8);
  CATCH_CHECK(requests[1].slice_params == 160000);
  CATCH_CHECK(requests[2].slice_params == 20000);
  CATCH_CHECK(requests[3].before_iteration == 17);
  CATCH_CHECK(requests[3].slice_params == 160000);
  CATCH_CHECK(search.report().done_iteration == 18);
  CATCH_CHECK(SliceSearch::IterationsNeeded({.candidates = {40000, 80000, 160000, 20000}}) == 18);
  CATCH_CHECK(SliceSearch::IterationsNeeded({.candidates = {40000, 160000, 10000}}) == 14);
  const auto& timed = search.report().candidates;
  CATCH_REQUIRE(timed.size() == 4);
  CATCH_CHECK(timed[0].iterations == std::vector<int64_t>{2, 3, 4});
  CATCH_CHECK(timed[1].from_iteration == 5);
  CATCH_CHECK(timed[1].iterations == std::vector<int64_t>{6, 7, 8});  // 5 mixes two plans
  CATCH_CHECK(timed[2].iterations == std::vector<int64_t>{10, 11, 12});
  CATCH_CHECK(timed[3].iterations == std::vector<int64_t>{14, 15, 16});
  CATCH_CHECK(timed[2].mean_seconds == Approx(0.9));
}

CATCH_TEST_CASE("every timed iteration ran on the plan it is counted for") {
  SliceSearch search({.candidates = {40000, 80000, 160000, 20000}}, 0);
  // Each plan's iterations take a time that names it; a mixed or foreign one would show.
  const std::map<int64_t, double> cost = {
      {40000, 1.0}, {80000, 2.0}, {160000, 3.0}, {20000, 4.0}};
  Run(search, 0, 40, 40000, [&](int64_t s, int64_t) { return cost.at(s); });
  for (const SliceSearchCandidateReport& c : search.report().candidates) {
    CATCH_CHECK(c.seconds == std::vector<double>(3, cost.at(c.slice_params)));
  }
}

CATCH_TEST_CASE("the window's mean decides, not its median, when long and short iterations alternate") {
  SliceSearch search({.candidates = {80000, 160000, 320000, 40000}}, 0);
  // 80000 alternates 0.6 s and 1.0 s (median 0.6 s, but 0.73 s an iteration over the
  // window); 160000 takes a steady 0.7 s: 4.5 % more throughput.
  const auto requests = Run(search, 0, 40, 80000, [](int64_t s, int64_t it) {
    if (s == 80000) return it % 2 == 0 ? 0.6 : 1.0;
    if (s == 160000) return 0.7;
    return 1.1;
  });
  CATCH_REQUIRE(search.done());
  CATCH_CHECK(search.report().candidates[0].seconds == std::vector<double>{0.6, 1.0, 0.6});
  CATCH_CHECK(search.report().chosen == 160000);
  CATCH_CHECK(search.report().reason.find("beyond the margin") != std::string::npos);
  CATCH_CHECK(requests.back().slice_params == 160000);
}

CATCH_TEST_CASE("a gain within the margin keeps the start") {
  SliceSearch search({.candidates = {80000, 160000, 320000, 40000}}, 0);
  // 320000 is 1.5 % faster: within the default margin of 2 %.
  const auto requests = Run(search, 0, 40, 80000, [](int64_t s, int64_t) {
    if (s == 80000) return 1.0;
    return s == 320000 ? 0.985 : 1.1;
  });
  CATCH_REQUIRE(search.done());
  CATCH_CHECK(search.report().chosen == 80000);
  CATCH_CHECK(search.report().reason.find("within the margin 2.0 %") != std::string::npos);
  CATCH_REQUIRE(requests.size() == 4);
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
  CATCH_CHECK(search.report().done_iteration == 113);  // decided before 113, on 10000 since 109
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
