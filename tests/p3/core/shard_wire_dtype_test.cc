// The shard on a 16-bit wire (ShardOptions::wire_dtype): values go down encoded once per
// version, the master values, optimizer state and checkpoints stay float32.
#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "p3/core/parameter_shard.h"
#include "p3/core/wire_dtype.h"
#include "tests/p3/core/shard_test_util.h"

namespace p3 {
namespace {

using shard_test::InitAll;
using shard_test::Options;
using shard_test::Signature;

ShardOptions WireOptions(int workers, WireDType dtype) {
  ShardOptions o = Options(workers, 0.5);
  o.wire_dtype = dtype;
  return o;
}

ClusterSignature WireSignature(int workers, WireDType dtype) {
  ClusterSignature sig = Signature(workers);
  sig.wire_dtype = dtype;
  return sig;
}

CATCH_TEST_CASE("on a 16-bit wire, encoded values handed out stay unchanged across versions") {
  for (WireDType dtype : {WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    ParameterShard shard(WireOptions(1, dtype));
    CATCH_REQUIRE(shard.Join(WireSignature(1, dtype), 0).ok());
    InitAll(shard);
    const std::vector<float> g = {0.3f, 0.3f, 0.3f};
    auto v1 = shard.Gradient(0, 0, 0, g.data(), 3, 0, dtype == WireDType::kFloat16
                                                          ? std::optional<int>(0)
                                                          : std::nullopt);
    CATCH_REQUIRE(v1.ok());
    CATCH_REQUIRE(v1->size() == 1);
    const std::shared_ptr<const Snapshot> held = (*v1)[0].message.values;
    CATCH_REQUIRE(held != nullptr);
    CATCH_CHECK(held->dtype() == dtype);
    const Snapshot copy = *held;
    for (uint64_t it = 1; it < 5; ++it) {
      auto out = shard.Gradient(0, 0, it, g.data(), 3, 0, dtype == WireDType::kFloat16
                                                             ? std::optional<int>(0)
                                                             : std::nullopt);
      CATCH_REQUIRE(out.ok());
      CATCH_REQUIRE(out->size() == 1);
      // Each version is the master values rounded; the master values are float32.
      const std::vector<float> master = shard.SliceValues(0)->first;
      std::vector<float> want(3);
      RoundToWire(dtype, master.data(), 3,
                  (*out)[0].message.values->scale_exponent().value_or(0), want.data());
      CATCH_CHECK(DecodedValues((*out)[0].message) == want);
    }
    CATCH_CHECK(held->bytes() == copy.bytes());
    CATCH_CHECK(held->scale_exponent() == copy.scale_exponent());
    // The master values keep what 16 bits cannot hold.
    const std::vector<float> master = shard.SliceValues(0)->first;
    std::vector<float> rounded(3);
    RoundToWire(dtype, master.data(), 3, Float16ScaleExponent(master.data(), 3), rounded.data());
    CATCH_CHECK(rounded != master);
  }
}

CATCH_TEST_CASE("on a 16-bit wire a checkpoint holds float32 master values") {
  std::optional<ShardCheckpoint> saved;
  ShardOptions o = WireOptions(1, WireDType::kBFloat16);
  o.checkpoint_every = 1;
  o.on_checkpoint = [&](ShardCheckpoint c) { saved = std::move(c); };
  ParameterShard shard(o);
  CATCH_REQUIRE(shard.Join(WireSignature(1, WireDType::kBFloat16), 0).ok());
  // Initial values that bfloat16 cannot hold.
  std::vector<float> w = {1.001f, 2.002f, 3.003f, 4.004f, 5.005f}, b = {6.006f, 7.007f};
  CATCH_REQUIRE(shard.Init(0, 0, w.data(), 3).ok());
  CATCH_REQUIRE(shard.Init(0, 1, w.data() + 3, 2).ok());
  auto zero = shard.Init(0, 2, b.data(), 2);
  CATCH_REQUIRE(zero.ok());
  // Version 0 goes out rounded, the master values are the initial ones, exactly.
  CATCH_CHECK(DecodedValues((*zero)[0].message) != std::vector<float>(w.begin(), w.begin() + 3));
  CATCH_CHECK(shard.SliceValues(0)->first == std::vector<float>(w.begin(), w.begin() + 3));
  const std::vector<float> g = {0, 0, 0};
  for (int slice = 0; slice < 3; ++slice) {
    const int n = slice == 0 ? 3 : 2;
    CATCH_REQUIRE(shard.Gradient(0, slice, 0, g.data(), n).ok());
  }
  CATCH_REQUIRE(saved.has_value());
  CATCH_CHECK(saved->slices[0].params == std::vector<float>(w.begin(), w.begin() + 3));
  CATCH_CHECK(saved->slices[2].params == b);
}

}  // namespace
}  // namespace p3
