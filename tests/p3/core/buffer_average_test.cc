#include "p3/core/buffer_average.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace p3 {
namespace {

CATCH_TEST_CASE("the mean of the buffers comes once every worker's are in") {
  BufferAverage average(3);
  const std::vector<float> a = {1.0f, 10.0f}, b = {2.0f, 20.0f}, c = {6.0f, 0.0f};
  auto first = average.Add(0, 40, a.data(), 2);
  CATCH_REQUIRE(first.ok());
  CATCH_CHECK(first->values == nullptr);
  auto second = average.Add(2, 40, c.data(), 2);
  CATCH_REQUIRE(second.ok());
  CATCH_CHECK(second->values == nullptr);
  auto last = average.Add(1, 40, b.data(), 2);
  CATCH_REQUIRE(last.ok());
  CATCH_REQUIRE(last->values != nullptr);
  CATCH_CHECK(last->for_everyone);
  CATCH_CHECK(*last->values == std::vector<float>{3.0f, 10.0f});
  // The next round may be any later iteration.
  CATCH_CHECK(average.Add(0, 80, a.data(), 2).ok());
}

CATCH_TEST_CASE("the mean sums in rank order whatever order the buffers arrive in") {
  // Values whose float sum depends on the order: (1e8 + -1e8) + 1 = 1, 1e8 + (-1e8 + 1) = 0.
  const std::vector<std::vector<float>> by_rank = {{1e8f}, {-1e8f}, {1.0f}};
  const float want = ((1e8f + -1e8f) + 1.0f) / 3.0f;
  for (const std::vector<int>& order : {std::vector<int>{0, 1, 2}, std::vector<int>{2, 1, 0},
                                        std::vector<int>{1, 2, 0}}) {
    BufferAverage average(3);
    std::shared_ptr<const std::vector<float>> mean;
    for (int r : order) {
      auto got = average.Add(r, 0, by_rank[r].data(), 1);
      CATCH_REQUIRE(got.ok());
      if (got->values != nullptr) mean = got->values;
    }
    CATCH_REQUIRE(mean != nullptr);
    CATCH_CHECK((*mean)[0] == want);
  }
}

CATCH_TEST_CASE("buffers that do not fit the open round are refused without changing it") {
  BufferAverage average(2);
  const std::vector<float> v = {1.0f, 2.0f, 3.0f};
  CATCH_CHECK(average.Add(2, 0, v.data(), 3).status().code() ==
              absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(average.Add(-1, 0, v.data(), 3).status().code() ==
              absl::StatusCode::kInvalidArgument);
  CATCH_REQUIRE(average.Add(0, 10, v.data(), 3).ok());
  // Round 10 is open: another round is refused.
  CATCH_CHECK(average.Add(1, 11, v.data(), 3).status().code() ==
              absl::StatusCode::kInvalidArgument);
  auto shorter = average.Add(1, 10, v.data(), 2);
  CATCH_CHECK(shorter.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(std::string(shorter.status().message()).find("2 values") != std::string::npos);
  // The round is still open and completes with a fitting contribution.
  auto done = average.Add(1, 10, v.data(), 3);
  CATCH_REQUIRE(done.ok());
  CATCH_REQUIRE(done->values != nullptr);
  CATCH_CHECK(*done->values == v);
  // A round before the last completed one is over.
  auto earlier = average.Add(0, 9, v.data(), 3);
  CATCH_CHECK(earlier.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(std::string(earlier.status().message()).find("round 10 has completed") !=
              std::string::npos);
}

CATCH_TEST_CASE("a worker that sends a completed round again gets its mean back alone") {
  BufferAverage average(2);
  const std::vector<float> a = {2.0f}, b = {4.0f}, fresh = {100.0f};
  CATCH_REQUIRE(average.Add(0, 5, a.data(), 1).ok());
  CATCH_REQUIRE(average.Add(1, 5, b.data(), 1)->for_everyone);
  // Rank 1 restarted and sends round 5 again with fresh statistics: it gets round 5's
  // mean, which does not change.
  auto again = average.Add(1, 5, fresh.data(), 1);
  CATCH_REQUIRE(again.ok());
  CATCH_REQUIRE(again->values != nullptr);
  CATCH_CHECK_FALSE(again->for_everyone);
  CATCH_CHECK((*again->values)[0] == 3.0f);
  CATCH_CHECK(average.Add(1, 5, fresh.data(), 2).status().code() ==
              absl::StatusCode::kInvalidArgument);
}

CATCH_TEST_CASE("a worker that sends its buffers again replaces its earlier ones") {
  BufferAverage average(2);
  const std::vector<float> stale = {100.0f}, fresh = {2.0f}, other = {4.0f};
  CATCH_REQUIRE(average.Add(0, 0, stale.data(), 1).ok());
  auto again = average.Add(0, 0, fresh.data(), 1);
  CATCH_REQUIRE(again.ok());
  CATCH_CHECK(again->values == nullptr);  // still waiting for rank 1
  auto done = average.Add(1, 0, other.data(), 1);
  CATCH_REQUIRE(done.ok());
  CATCH_REQUIRE(done->values != nullptr);
  CATCH_CHECK((*done->values)[0] == 3.0f);
}

CATCH_TEST_CASE("a model without buffers averages an empty round") {
  BufferAverage average(2);
  CATCH_REQUIRE(average.Add(0, 0, nullptr, 0).ok());
  auto done = average.Add(1, 0, nullptr, 0);
  CATCH_REQUIRE(done.ok());
  CATCH_REQUIRE(done->values != nullptr);
  CATCH_CHECK(done->values->empty());
}

CATCH_TEST_CASE("an elastic round averages its present ranks only, in rank order") {
  BufferAverage average(4);
  const std::vector<int> present = {0, 2, 3};  // rank 1 has left, 3 has joined
  const std::vector<float> a = {1e8f}, c = {-1e8f}, d = {1.0f};
  const std::vector<float> b = {5.0f};
  // A rank that is not present is refused, and the round stays as it was.
  auto absent = average.Add(1, 7, b.data(), 1, present);
  CATCH_CHECK(absent.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(std::string(absent.status().message()).find("only workers 0, 2, 3") !=
              std::string::npos);
  CATCH_REQUIRE(average.Add(3, 7, d.data(), 1, present)->values == nullptr);
  CATCH_REQUIRE(average.Add(2, 7, c.data(), 1, present)->values == nullptr);
  // Another set of contributors for the open round is refused.
  CATCH_CHECK(average.Add(0, 7, a.data(), 1, {0, 2}).status().code() ==
              absl::StatusCode::kInvalidArgument);
  auto done = average.Add(0, 7, a.data(), 1, present);
  CATCH_REQUIRE(done.ok());
  CATCH_REQUIRE(done->values != nullptr);
  CATCH_CHECK(done->for_everyone);
  // (1e8 + -1e8) + 1 over 3 present ranks; arrival order (3, 2, 0) would give 0.
  CATCH_CHECK((*done->values)[0] == ((1e8f + -1e8f) + 1.0f) / 3.0f);
}

}  // namespace
}  // namespace p3
