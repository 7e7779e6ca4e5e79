#include "p3/base/stats.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

namespace p3 {
namespace {

CATCH_TEST_CASE("median of an odd count is the middle value, of an even count the mean of two") {
  CATCH_CHECK(Median({5, 1, 3}) == 3);
  CATCH_CHECK(Median({4, 1, 3, 2}) == 2.5);
  CATCH_CHECK(Median({7}) == 7);
  CATCH_CHECK(Median({2, 2, 9, 2}) == 2);
}

CATCH_TEST_CASE("median of nothing is 0") { CATCH_CHECK(Median({}) == 0); }

CATCH_TEST_CASE("streaming median is within half its resolution of the exact median") {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> rate(std::log(1000.0), 0.3);
  for (int n : {1, 2, 3, 10, 101, 1000, 20000}) {
    StreamingMedian streaming;
    std::vector<double> values;
    for (int i = 0; i < n; ++i) {
      values.push_back(rate(rng));
      streaming.Add(values.back());
    }
    const double exact = Median(values);
    CATCH_CHECK(streaming.count() == n);
    CATCH_CHECK(std::abs(streaming.Median() / exact - 1) <= 0.0005 + 1e-12);
  }
}

CATCH_TEST_CASE("streaming median's memory stays bounded however many values it sees") {
  StreamingMedian streaming;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> rate(500.0, 1500.0);  // ln(3) / 0.001 ~ 1,100 buckets
  for (int i = 0; i < 200000; ++i) streaming.Add(rate(rng));
  const size_t after_200k = streaming.buckets();
  for (int i = 0; i < 200000; ++i) streaming.Add(rate(rng));
  CATCH_CHECK(after_200k <= 2 * 1100 + 2 * 64);  // the span, with slack for growth
  CATCH_CHECK(streaming.buckets() == after_200k);
  CATCH_CHECK(streaming.count() == 400000);
}

CATCH_TEST_CASE("streaming median counts zero and non-finite values as 0, and is 0 when empty") {
  StreamingMedian streaming;
  CATCH_CHECK(streaming.Median() == 0);
  streaming.Add(0);
  streaming.Add(-1);
  streaming.Add(5);
  CATCH_CHECK(streaming.Median() == 0);
  streaming.Add(5);
  streaming.Add(5);
  CATCH_CHECK(std::abs(streaming.Median() / 5 - 1) <= 0.0005);
}

}  // namespace
}  // namespace p3
