#include "p3/core/membership.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace p3 {
namespace {

bool Mentions(const absl::Status& s, const std::string& what) {
  return std::string(s.message()).find(what) != std::string::npos;
}

CATCH_TEST_CASE("the present set of an iteration is the last change's at or before it") {
  MembershipSchedule m(3, 2);
  CATCH_CHECK(m.PresentAt(0) == std::vector<int>{0, 1});
  CATCH_REQUIRE(m.Add(100, {0, 1, 2}).ok());
  CATCH_REQUIRE(m.Add(200, {0, 1}).ok());
  CATCH_CHECK(m.PresentAt(99) == std::vector<int>{0, 1});
  CATCH_CHECK(m.PresentAt(100) == std::vector<int>{0, 1, 2});
  CATCH_CHECK(m.PresentAt(199) == std::vector<int>{0, 1, 2});
  CATCH_CHECK(m.PresentAt(200) == std::vector<int>{0, 1});
  CATCH_CHECK(m.PresentAt(1000000) == std::vector<int>{0, 1});
  CATCH_CHECK(m.changes().size() == 3);
}

CATCH_TEST_CASE("samples before an iteration add up each iteration's present workers") {
  MembershipSchedule m(3, 2);
  CATCH_CHECK(m.SamplesBefore(0, 4) == 0);
  CATCH_CHECK(m.SamplesBefore(10, 4) == 80);
  CATCH_REQUIRE(m.Add(100, {0, 1, 2}).ok());
  CATCH_REQUIRE(m.Add(200, {0, 1}).ok());
  CATCH_CHECK(m.SamplesBefore(100, 4) == 800);
  CATCH_CHECK(m.SamplesBefore(150, 4) == 800 + 50 * 12);
  CATCH_CHECK(m.SamplesBefore(250, 4) == 4 * (100 * 2 + 100 * 3 + 50 * 2));
}

CATCH_TEST_CASE("a change that does not fit is refused, naming why, and changes nothing") {
  MembershipSchedule m(3, 2);
  CATCH_REQUIRE(m.Add(10, {0, 2}).ok());  // 1 leaves, 2 joins
  CATCH_CHECK(Mentions(m.Add(10, {0, 2}), "iteration order"));
  CATCH_CHECK(Mentions(m.Add(5, {0, 2}), "iteration order"));
  CATCH_CHECK(Mentions(m.Add(20, {2}), "rank 0 must be present"));
  CATCH_CHECK(Mentions(m.Add(20, {}), "rank 0 must be present"));
  CATCH_CHECK(Mentions(m.Add(20, {0, 3}), "out of range for 3 ranks"));
  CATCH_CHECK(Mentions(m.Add(20, {0, 2, 2}), "increasing order"));
  const absl::Status back = m.Add(20, {0, 1, 2});
  CATCH_CHECK(back.code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(Mentions(back, "rank 1 has left"));
  CATCH_CHECK(m.HasLeft(1));
  CATCH_CHECK(!m.HasLeft(2));
  CATCH_CHECK(m.changes().size() == 2);
  CATCH_CHECK(m.latest() == std::vector<int>{0, 2});
}

CATCH_TEST_CASE("without changes every rank is present from the start") {
  MembershipSchedule m(4, 4);
  CATCH_CHECK(m.PresentAt(12345) == std::vector<int>{0, 1, 2, 3});
  CATCH_CHECK(!m.HasLeft(3));
  CATCH_CHECK(DescribeRanks(m.latest()) == "0, 1, 2, 3");
}

}  // namespace
}  // namespace p3
