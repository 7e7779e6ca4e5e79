// One version of a slice's values as they go on the wire (p3/core/snapshot.h), and the
// values of a message down (p3/core/downstream.h).
#include "p3/core/snapshot.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "p3/core/downstream.h"
#include "p3/core/wire_dtype.h"

namespace p3 {
namespace {

// Values no 16-bit dtype holds exactly, a negative zero, and magnitudes far apart.
const std::vector<float> kValues = {1.001f, -2.7183f, 3.14159f, 1e-3f, -0.0f, 65519.0f, 7e-6f};

std::string BytesOf(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

CATCH_TEST_CASE("a float32 snapshot holds the values' own bytes and no scale") {
  Snapshot s(WireDType::kFloat32);
  std::vector<float> values = kValues;
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  s.Assign(values.data(), static_cast<int64_t>(values.size()));
  CATCH_CHECK(s.dtype() == WireDType::kFloat32);
  CATCH_CHECK(s.size() == static_cast<int64_t>(values.size()));
  CATCH_CHECK(std::string(s.bytes()) == BytesOf(values));
  CATCH_CHECK_FALSE(s.scale_exponent().has_value());
  // Decoded bit for bit, the NaN and the sign of zero included.
  CATCH_CHECK(BytesOf(s.Decoded()) == BytesOf(values));
}

CATCH_TEST_CASE("a 16-bit snapshot is the wire's encoding: two bytes a value, rounded once") {
  for (WireDType dtype : {WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    const int64_t n = static_cast<int64_t>(kValues.size());
    Snapshot s(dtype);
    s.Assign(kValues.data(), n);
    CATCH_CHECK(s.size() == n);
    CATCH_CHECK(s.bytes().size() == static_cast<size_t>(2 * n));
    // float16 carries the slice's scale, bfloat16 none (SliceData.scale_exponent).
    const int e = dtype == WireDType::kFloat16 ? Float16ScaleExponent(kValues.data(), n) : 0;
    if (dtype == WireDType::kFloat16) {
      CATCH_CHECK(s.scale_exponent() == std::optional<int>(e));
      CATCH_CHECK(e != 0);  // 65519 is scaled down
    } else {
      CATCH_CHECK_FALSE(s.scale_exponent().has_value());
    }
    std::string want(2 * n, '\0');
    EncodeValues(dtype, kValues.data(), n, e, want.data());
    CATCH_CHECK(std::string(s.bytes()) == want);
    std::vector<float> rounded(n);
    RoundToWire(dtype, kValues.data(), n, e, rounded.data());
    CATCH_CHECK(s.Decoded() == rounded);
    CATCH_CHECK(s.Decoded() != kValues);
  }
}

CATCH_TEST_CASE("a snapshot reuses its storage from version to version") {
  for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    const int64_t n = static_cast<int64_t>(kValues.size());
    Snapshot s(dtype);
    s.Reserve(n);
    const int64_t reserved = s.capacity_bytes();
    CATCH_CHECK(reserved >= n * static_cast<int64_t>(BytesPerValue(dtype)));
    s.Assign(kValues.data(), n);
    const char* storage = s.bytes().data();
    CATCH_CHECK(s.capacity_bytes() == reserved);
    // A later version, and a shorter one: the same storage, the new values.
    std::vector<float> next(kValues.rbegin(), kValues.rend());
    s.Assign(next.data(), n);
    CATCH_CHECK(s.bytes().data() == storage);
    s.Assign(next.data(), 2);
    CATCH_CHECK(s.bytes().data() == storage);
    CATCH_CHECK(s.size() == 2);
    std::vector<float> rounded(2);
    const int e = dtype == WireDType::kFloat16 ? Float16ScaleExponent(next.data(), 2) : 0;
    RoundToWire(dtype, next.data(), 2, e, rounded.data());
    CATCH_CHECK(s.Decoded() == rounded);
  }
}

CATCH_TEST_CASE("the values of a message down: a version decoded, the buffers' mean, else none") {
  auto snapshot = std::make_shared<Snapshot>(WireDType::kBFloat16);
  snapshot->Assign(kValues.data(), 3);
  Downstream params{.kind = Downstream::Kind::kParams, .values = snapshot};
  CATCH_CHECK(DecodedValues(params) == snapshot->Decoded());
  CATCH_CHECK(DecodedValues(Downstream{.kind = Downstream::Kind::kParams}).empty());
  Downstream buffers{.kind = Downstream::Kind::kBuffers,
                     .buffers = std::make_shared<const std::vector<float>>(kValues)};
  CATCH_CHECK(DecodedValues(buffers) == kValues);
  CATCH_CHECK(DecodedValues(Downstream{.kind = Downstream::Kind::kAck, .slice_id = 2}).empty());
}

}  // namespace
}  // namespace p3
