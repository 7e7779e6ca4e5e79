#include "worker/backward_spans.h"

#include <optional>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/time/time.h"

namespace p3 {
namespace {

absl::Time Ms(int ms) { return absl::UnixEpoch() + absl::Milliseconds(ms); }

// One pass: gradients of blocks {block, ms} in autograd's order, the pass from 0 to end.
std::vector<BackwardSpans::Span> Pass(BackwardSpans& spans,
                                      const std::vector<std::pair<int, int>>& gradients,
                                      int end) {
  std::vector<BackwardSpans::Span> out;
  spans.Begin(Ms(0));
  for (const auto& [block, ms] : gradients) {
    std::optional<BackwardSpans::Span> s = spans.OnGradient(block, Ms(ms));
    if (s) out.push_back(*s);
  }
  if (std::optional<BackwardSpans::Span> s = spans.End(Ms(end))) out.push_back(*s);
  return out;
}

CATCH_TEST_CASE("a backward span ends at its block's last gradient and is named by that block") {
  // Block 2 (the model's last) computes from 0 to 10 ms: its first gradient at 1, its
  // last at 10. Block 1 from 10 to 40 (gradients at 12 and 40), block 0 from 40 to 45.
  BackwardSpans spans;
  const auto got = Pass(spans, {{2, 1}, {2, 10}, {1, 12}, {1, 25}, {1, 40}, {0, 41}, {0, 44}}, 45);
  CATCH_REQUIRE(got.size() == 3);
  CATCH_CHECK(got[0].block == 2);
  CATCH_CHECK(got[0].start == Ms(0));
  CATCH_CHECK(got[0].end == Ms(10));
  CATCH_CHECK(got[1].block == 1);
  CATCH_CHECK(got[1].start == Ms(10));
  // Block 1's 30 ms, not the 11 from block 2's first gradient to block 1's first.
  CATCH_CHECK(got[1].end == Ms(40));
  CATCH_CHECK(got[2].block == 0);
  CATCH_CHECK(got[2].start == Ms(40));
  CATCH_CHECK(got[2].end == Ms(45));  // the first block's span ends with the pass
}

CATCH_TEST_CASE("backward spans tile the pass, and a new pass starts afresh") {
  BackwardSpans spans;
  const auto first = Pass(spans, {{1, 3}, {0, 7}}, 9);
  CATCH_REQUIRE(first.size() == 2);
  CATCH_CHECK(first[0].end == first[1].start);
  const auto second = Pass(spans, {{1, 2}}, 5);
  CATCH_REQUIRE(second.size() == 1);
  CATCH_CHECK(second[0].block == 1);
  CATCH_CHECK(second[0].start == Ms(0));
  CATCH_CHECK(second[0].end == Ms(5));
}

CATCH_TEST_CASE("a pass without gradients has no backward span") {
  BackwardSpans spans;
  CATCH_CHECK(Pass(spans, {}, 4).empty());
}

}  // namespace
}  // namespace p3
