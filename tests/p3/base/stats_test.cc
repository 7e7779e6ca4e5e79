#include "p3/base/stats.h"

#include <catch2/catch.hpp>

namespace p3 {
namespace {

CATCH_TEST_CASE("median of an odd count is the middle value, of an even count the mean of two") {
  CATCH_CHECK(Median({5, 1, 3}) == 3);
  CATCH_CHECK(Median({4, 1, 3, 2}) == 2.5);
  CATCH_CHECK(Median({7}) == 7);
  CATCH_CHECK(Median({2, 2, 9, 2}) == 2);
}

CATCH_TEST_CASE("median of nothing is 0") { CATCH_CHECK(Median({}) == 0); }

}  // namespace
}  // namespace p3
