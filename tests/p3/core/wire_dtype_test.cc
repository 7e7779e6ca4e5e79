#include "p3/core/wire_dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace p3 {
namespace {

float FloatOfBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

float DecodeHalf(uint16_t h) {
  float f;
  DecodeFloat16(&h, 1, 1.0f, &f);
  return f;
}

uint16_t EncodeHalf(float x) {
  uint16_t h;
  EncodeFloat16(&x, 1, 1.0f, &h);
  return h;
}

float DecodeBf(uint16_t h) {
  float f;
  DecodeBFloat16(&h, 1, &f);
  return f;
}

uint16_t EncodeBf(float x) {
  uint16_t h;
  EncodeBFloat16(&x, 1, &h);
  return h;
}

// The 16-bit pattern nearest to x among the finite, non-negative ones of a format, ties
// to the even pattern; `values` are their float values in pattern order (increasing).
// Returns -1 where x lies beyond the largest by at least half a step (infinity).
int NearestPattern(double x, const std::vector<double>& values, double overflow) {
  if (x >= overflow) return -1;
  auto hi = std::lower_bound(values.begin(), values.end(), x);
  if (hi == values.end()) return static_cast<int>(values.size()) - 1;
  if (hi == values.begin() || *hi == x) return static_cast<int>(hi - values.begin());
  auto lo = hi - 1;
  const double dl = x - *lo, dh = *hi - x;
  const int l = static_cast<int>(lo - values.begin());
  if (dl < dh) return l;
  if (dh < dl) return l + 1;
  return (l % 2 == 0) ? l : l + 1;
}

// Checks Encode(x) against NearestPattern for x, -x, and the values a float32 ulp away.
template <typename Encode>
void CheckRounding(const std::vector<double>& values, double overflow, uint16_t inf,
                   Encode encode, float x) {
  for (float v : {x, std::nextafter(x, 0.0f), std::nextafter(x, INFINITY)}) {
    const int want = NearestPattern(v, values, overflow);
    const uint16_t expected = want < 0 ? inf : static_cast<uint16_t>(want);
    CATCH_CAPTURE(v, expected);
    CATCH_REQUIRE(encode(v) == expected);
    CATCH_REQUIRE(encode(-v) == (expected | 0x8000));
  }
}

CATCH_TEST_CASE("every float16 value decodes and encodes back to itself") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = DecodeHalf(static_cast<uint16_t>(h));
    if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) {
      CATCH_REQUIRE(std::isnan(f));
      CATCH_REQUIRE(std::isnan(DecodeHalf(EncodeHalf(f))));
      continue;
    }
    CATCH_CAPTURE(h, f);
    CATCH_REQUIRE(EncodeHalf(f) == h);
  }
  CATCH_CHECK(DecodeHalf(0x3c00) == 1.0f);
  CATCH_CHECK(DecodeHalf(0x7bff) == 65504.0f);
  CATCH_CHECK(DecodeHalf(0x0001) == std::ldexp(1.0f, -24));
}

CATCH_TEST_CASE("float16 encoding rounds to the nearest value, ties to even, subnormals too") {
  std::vector<double> values;  // the 31,744 finite non-negative float16 values
  for (uint32_t h = 0; h < 0x7c00; ++h) values.push_back(DecodeHalf(static_cast<uint16_t>(h)));
  const double overflow = 65520.0;  // half-way to 65536: rounds to infinity
  auto encode = [](float v) { return EncodeHalf(v); };
  // Every value, and every midpoint between neighbours (exact in float32).
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    CheckRounding(values, overflow, 0x7c00, encode, static_cast<float>(values[i]));
    CheckRounding(values, overflow, 0x7c00, encode,
                  static_cast<float>((values[i] + values[i + 1]) / 2));
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-30.0f, 17.0f);
  for (int i = 0; i < 200000; ++i) {
    CheckRounding(values, overflow, 0x7c00, encode, std::exp2(exponent(rng)));
  }
  CATCH_CHECK(EncodeHalf(INFINITY) == 0x7c00);
  CATCH_CHECK(EncodeHalf(1e9f) == 0x7c00);
  CATCH_CHECK(std::isnan(DecodeHalf(EncodeHalf(NAN))));
}

CATCH_TEST_CASE("bfloat16 encoding rounds to the nearest value, ties to even; NaN stays NaN") {
  std::vector<double> values;  // finite non-negative bfloat16 values
  for (uint32_t h = 0; h < 0x7f80; ++h) values.push_back(DecodeBf(static_cast<uint16_t>(h)));
  // Half-way between the largest finite bfloat16 and 2^128.
  const double overflow = values.back() + (std::ldexp(1.0, 128) - values.back()) / 2;
  auto encode = [](float v) { return EncodeBf(v); };
  for (size_t i = 0; i + 1 < values.size(); i += 7) {
    CheckRounding(values, overflow, 0x7f80, encode, static_cast<float>(values[i]));
    CheckRounding(values, overflow, 0x7f80, encode,
                  static_cast<float>((values[i] + values[i + 1]) / 2));
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = DecodeBf(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      CATCH_REQUIRE(std::isnan(DecodeBf(EncodeBf(f))));
    } else {
      CATCH_REQUIRE(EncodeBf(f) == h);
    }
  }
  // A NaN whose payload is only in the low bits must not become infinity.
  CATCH_CHECK(std::isnan(DecodeBf(EncodeBf(FloatOfBits(0x7f800001u)))));
  CATCH_CHECK(EncodeBf(INFINITY) == 0x7f80);
}

CATCH_TEST_CASE("the float16 scale puts the largest magnitude just below 2^15") {
  std::mt19937 rng(3);
  for (float magnitude : {1e-9f, 3e-5f, 0.7f, 1.0f, 1000.0f, 65504.0f, 1e6f, 3e30f}) {
    std::normal_distribution<float> normal(0.0f, magnitude);
    std::vector<float> grad(4096);
    for (float& g : grad) g = normal(rng);
    const float scale = Float16Scale(grad.data(), 4096);
    float largest = 0;
    for (float g : grad) largest = std::max(largest, std::fabs(g));
    CATCH_CAPTURE(magnitude, scale, largest);
    CATCH_CHECK(largest * scale >= 16384.0f);
    CATCH_CHECK(largest * scale < 32768.0f);
    int e;
    CATCH_CHECK(std::frexp(scale, &e) == 0.5f);  // a power of two
    // Round trip: no overflow, and every value within float16's relative precision
    // (2^-11) of the block's largest normal range, or of the subnormal step below it.
    std::vector<uint16_t> wire(4096);
    std::vector<float> back(4096);
    EncodeFloat16(grad.data(), 4096, scale, wire.data());
    DecodeFloat16(wire.data(), 4096, 1.0f / scale, back.data());
    for (size_t i = 0; i < grad.size(); ++i) {
      CATCH_REQUIRE(std::isfinite(back[i]));
      const double tolerance =
          std::max(std::fabs(grad[i]) * std::ldexp(1.0, -11), std::ldexp(1.0, -25) / scale);
      CATCH_REQUIRE(std::fabs(back[i] - grad[i]) <= tolerance);
    }
  }
  const std::vector<float> zeros(10, 0.0f);
  CATCH_CHECK(Float16Scale(zeros.data(), 10) == 1.0f);
  const std::vector<float> with_inf = {1.0f, INFINITY};
  CATCH_CHECK(Float16Scale(with_inf.data(), 2) == 1.0f);
  const std::vector<float> with_nan = {1.0f, NAN};
  CATCH_CHECK(Float16Scale(with_nan.data(), 2) == 1.0f);
}

CATCH_TEST_CASE("wire dtype names parse, and an unknown one lists the allowed ones") {
  CATCH_CHECK(*ParseWireDType("bfloat16") == WireDType::kBFloat16);
  CATCH_CHECK(BytesPerValue(WireDType::kFloat16) == 2);
  CATCH_CHECK(BytesPerValue(WireDType::kFloat32) == 4);
  CATCH_CHECK(std::string(WireDTypeName(WireDType::kFloat16)) == "float16");
  absl::StatusOr<WireDType> bad = ParseWireDType("fp8");
  CATCH_CHECK(absl::IsInvalidArgument(bad.status()));
  CATCH_CHECK(bad.status().message().find("allowed: float32, bfloat16, float16") !=
              absl::string_view::npos);
}

// --- The message-level functions the transports use.

std::vector<float> SomeValues(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  v[n / 2] = 0.0f;
  v[n / 3] = -3.5e-9f;  // far below the rest: a float16 subnormal after scaling
  return v;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

CATCH_TEST_CASE("encoded values decode exactly, at any alignment, and match RoundToWire") {
  const int n = 2500;  // more than one internal block of 1024
  const std::vector<float> in = SomeValues(n, 1);
  for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    const int e = dtype == WireDType::kFloat16 ? Float16ScaleExponent(in.data(), n) : 0;
    std::vector<float> rounded(n);
    RoundToWire(dtype, in.data(), n, e, rounded.data());
    for (size_t shift : {0, 1, 3}) {  // misaligned output and input bytes
      std::vector<char> bytes(n * BytesPerValue(dtype) + 8);
      EncodeValues(dtype, in.data(), n, e, bytes.data() + shift);
      std::vector<float> out(n);
      DecodeValues(dtype, bytes.data() + shift, n, e, out.data());
      CATCH_CHECK(SameBits(out, rounded));
    }
    if (dtype == WireDType::kFloat32) CATCH_CHECK(SameBits(rounded, in));
    if (dtype != WireDType::kFloat32) CATCH_CHECK_FALSE(SameBits(rounded, in));
    // Rounding is idempotent with the same scale, in place too.
    std::vector<float> again = rounded;
    RoundToWire(dtype, again.data(), n, e, again.data());
    CATCH_CHECK(SameBits(again, rounded));
  }
}

CATCH_TEST_CASE("values cut into segments at any byte decode as the whole does") {
  const int n = 37;
  const std::vector<float> in = SomeValues(n, 2);
  for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    const int e = dtype == WireDType::kFloat16 ? Float16ScaleExponent(in.data(), n) : 0;
    std::string bytes(n * BytesPerValue(dtype), '\0');
    EncodeValues(dtype, in.data(), n, e, bytes.data());
    std::vector<float> whole(n);
    DecodeValues(dtype, bytes.data(), n, e, whole.data());
    // Every pair of cut positions, including empty segments and cuts inside a value.
    for (size_t a = 0; a <= bytes.size(); a += 1) {
      for (size_t b = a; b <= bytes.size(); b += 3) {
        const std::vector<absl::string_view> segments = {
            absl::string_view(bytes.data(), a), absl::string_view(bytes.data() + a, b - a),
            absl::string_view(bytes.data() + b, bytes.size() - b)};
        std::vector<float> out(n, -1.0f);
        DecodeSegments(dtype, segments, e, out.data());
        CATCH_REQUIRE(SameBits(out, whole));
      }
    }
  }
}

CATCH_TEST_CASE(
    "a SegmentReader reads values cut at any byte, a few at a time and skipping some, as "
    "the whole decodes") {
  const int n = 37;
  const std::vector<float> in = SomeValues(n, 3);
  for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    const int e = dtype == WireDType::kFloat16 ? Float16ScaleExponent(in.data(), n) : 0;
    std::string bytes(n * BytesPerValue(dtype), '\0');
    EncodeValues(dtype, in.data(), n, e, bytes.data());
    std::vector<float> whole(n);
    DecodeValues(dtype, bytes.data(), n, e, whole.data());
    // Three cuts (empty segments and cuts inside a value included); reads of 1, 2, 3, ...
    // values, every fourth read skipped instead.
    for (size_t a = 0; a <= bytes.size(); a += 1) {
      for (size_t b = a; b <= bytes.size(); b += 5) {
        const size_t c = std::min(bytes.size(), b + 3);
        const std::vector<absl::string_view> segments = {
            absl::string_view(bytes.data(), a), absl::string_view(bytes.data() + a, b - a),
            absl::string_view(bytes.data() + b, c - b),
            absl::string_view(bytes.data() + c, bytes.size() - c)};
        SegmentReader reader(dtype, &segments, e);
        std::vector<float> out(n, -1.0f), want(n, -1.0f);
        int at = 0;
        for (int k = 1; at < n; ++k) {
          const int m = std::min(k, n - at);
          if (k % 4 == 0) {
            reader.Skip(m);
          } else {
            reader.Read(m, out.data() + at);
            std::copy_n(whole.data() + at, m, want.data() + at);
          }
          at += m;
        }
        CATCH_REQUIRE(SameBits(out, want));
      }
    }
  }
}

CATCH_TEST_CASE("the float16 scale exponent is that of Float16Scale and guards both ends") {
  std::vector<float> tiny = {2e-9f, -3e-10f, 1e-9f};  // below half float16's smallest subnormal
  std::vector<float> huge = {1e6f, -7e5f, 3.0f};     // beyond float16's largest, 65504
  for (const std::vector<float>& v : {tiny, huge}) {
    const int e = Float16ScaleExponent(v.data(), 3);
    CATCH_CHECK(std::ldexp(1.0f, e) == Float16Scale(v.data(), 3));
    std::vector<float> rounded(3);
    RoundToWire(WireDType::kFloat16, v.data(), 3, e, rounded.data());
    for (int i = 0; i < 3; ++i) {
      CATCH_CAPTURE(v[i], rounded[i]);
      CATCH_CHECK(std::isfinite(rounded[i]));
      CATCH_CHECK(rounded[i] != 0.0f);
      CATCH_CHECK(std::fabs(rounded[i] - v[i]) <= std::fabs(v[i]) * 1e-2);  // kept, not lost
    }
    // Without the scale the same values underflow to 0 or overflow to infinity.
    RoundToWire(WireDType::kFloat16, v.data(), 3, 0, rounded.data());
    CATCH_CHECK((rounded[0] == 0.0f || std::isinf(rounded[0])));
  }
  CATCH_CHECK(Float16ScaleExponent(huge.data(), 3) < 0);
  CATCH_CHECK(Float16ScaleExponent(tiny.data(), 3) > 0);
  // Non-finite values keep scale 1 and travel as what they are.
  std::vector<float> bad = {1.0f, NAN, INFINITY};
  CATCH_CHECK(Float16ScaleExponent(bad.data(), 3) == 0);
  std::vector<float> rounded(3);
  RoundToWire(WireDType::kFloat16, bad.data(), 3, 0, rounded.data());
  CATCH_CHECK(std::isnan(rounded[1]));
  CATCH_CHECK(std::isinf(rounded[2]));
}

}  // namespace
}  // namespace p3
