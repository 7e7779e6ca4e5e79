// fp16's dynamic loss scaling on the server side (ShardOptions::skip_nonfinite): a slice
// whose gradients of an iteration are not all finite keeps its values and optimizer state,
// its version advances, and the other slices update as usual.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "p3/core/parameter_shard.h"
#include "tests/p3/core/shard_test_util.h"

namespace p3 {
namespace {

using shard_test::InitAll;
using shard_test::Options;
using shard_test::Signature;

// Both workers' gradients of iteration 0 for the three slices; worker 1's slice 0 holds
// `bad` at its second value.
void Step(ParameterShard& shard, float bad) {
  const std::vector<float> ones = {1, 1, 1};
  std::vector<float> odd = {1, bad, 1};
  for (int rank = 0; rank < 2; ++rank) {
    CATCH_REQUIRE(shard.Gradient(rank, 0, 0, rank == 1 ? odd.data() : ones.data(), 3).ok());
    CATCH_REQUIRE(shard.Gradient(rank, 1, 0, ones.data(), 2).ok());
    CATCH_REQUIRE(shard.Gradient(rank, 2, 0, ones.data(), 2).ok());
  }
}

CATCH_TEST_CASE("with skip_nonfinite a slice whose gradients overflowed keeps its values") {
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    ShardOptions o = Options(2, /*lr=*/0.5);
    o.skip_nonfinite = true;
    ParameterShard shard(o);
    for (int r = 0; r < 2; ++r) CATCH_REQUIRE(shard.Join(Signature(2), r).ok());
    InitAll(shard);
    Step(shard, bad);
    auto [w0, v0] = *shard.SliceValues(0);
    CATCH_CHECK(v0 == 1);  // the version advances
    CATCH_CHECK(w0 == std::vector<float>{1, 2, 3});
    auto [w1, v1] = *shard.SliceValues(1);
    CATCH_CHECK(v1 == 1);
    CATCH_CHECK(w1 == std::vector<float>{3.5f, 4.5f});  // 4 - 0.5 * 1, 5 - 0.5
    CATCH_CHECK(shard.SkippedUpdates() == 1);
  }
}

CATCH_TEST_CASE("without skip_nonfinite an overflowed gradient reaches the values") {
  ParameterShard shard(Options(2, 0.5));
  for (int r = 0; r < 2; ++r) CATCH_REQUIRE(shard.Join(Signature(2), r).ok());
  InitAll(shard);
  Step(shard, std::numeric_limits<float>::infinity());
  auto [w0, v0] = *shard.SliceValues(0);
  CATCH_CHECK(std::isinf(w0[1]));
  CATCH_CHECK(shard.SkippedUpdates() == 0);
}

CATCH_TEST_CASE("with skip_nonfinite finite gradients update exactly as without it") {
  std::vector<std::vector<float>> values;
  for (bool skip : {false, true}) {
    ShardOptions o = Options(2, 0.5);
    o.skip_nonfinite = skip;
    ParameterShard shard(o);
    for (int r = 0; r < 2; ++r) CATCH_REQUIRE(shard.Join(Signature(2), r).ok());
    InitAll(shard);
    Step(shard, 3.0f);
    values.push_back(shard.SliceValues(0)->first);
  }
  CATCH_CHECK(values[0] == values[1]);
}

}  // namespace
}  // namespace p3
