#include "p3/core/wire_dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace p3 {
namespace {

inline uint32_t BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float FloatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// float32 bit layout: sign 1, exponent 8 (bias 127), mantissa 23.
// float16: sign 1, exponent 5 (bias 15), mantissa 10.
constexpr uint32_t kAbsMask = 0x7fffffffu;
constexpr uint32_t kInfBits = 0x7f800000u;
// The smallest float32 that rounds to float16 infinity: 65520 = 2^15 * (2 - 2^-11).
constexpr uint32_t kF16OverflowBits = 0x477ff000u;
// Below 2^-14 a float16 is subnormal.
constexpr uint32_t kF16MinNormalBits = (127u - 14u) << 23;
// Adding 2^-1 (as float32 with exponent 126 = 127 - 15 + 1 + ... ) aligns a subnormal's
// bits so that the float adder rounds them to nearest even: 0.5f has exponent 126, whose
// ulp is 2^-24, float16's subnormal step.
constexpr uint32_t kDenormMagicBits = 126u << 23;  // 0.5f

// All ones when `condition`, else 0.
inline uint32_t Mask(bool condition) { return 0u - static_cast<uint32_t>(condition); }

inline uint16_t HalfOf(float x) {
  const uint32_t bits = BitsOf(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t a = bits & kAbsMask;
  // Normal range: rebias the exponent and round the 13 dropped bits to nearest even.
  const uint32_t odd = (a >> 13) & 1u;
  const uint32_t normal = (a + 0xc8000fffu + odd) >> 13;  // 0xc8000000 = (15 - 127) << 23
  // Subnormal range: let the float adder round at 2^-24.
  const uint32_t sub = BitsOf(FloatOf(a) + FloatOf(kDenormMagicBits)) - kDenormMagicBits;
  const uint32_t special = 0x7c00u | (Mask(a > kInfBits) & 0x0200u);  // infinity or NaN
  // All three computed, one kept by masks: no branch, so the loop vectorises.
  const uint32_t is_special = Mask(a >= kF16OverflowBits);
  const uint32_t is_sub = Mask(a < kF16MinNormalBits) & ~is_special;
  const uint32_t h = (special & is_special) | (sub & is_sub) | (normal & ~(is_special | is_sub));
  return static_cast<uint16_t>(h | sign);
}

inline float FloatOfHalf(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = h & 0x7c00u;
  const uint32_t mantissa = h & 0x03ffu;
  const uint32_t normal = ((exponent + 0x1c000u) << 13) | (mantissa << 13);  // +112 << 10
  const uint32_t special = kInfBits | (mantissa << 13);
  // Subnormal: mantissa * 2^-24, exact in float32.
  const uint32_t sub = BitsOf(static_cast<float>(mantissa) * 5.9604644775390625e-8f);
  const uint32_t is_special = Mask(exponent == 0x7c00u);
  const uint32_t is_sub = Mask(exponent == 0);
  const uint32_t magnitude =
      (special & is_special) | (sub & is_sub) | (normal & ~(is_special | is_sub));
  return FloatOf(magnitude | sign);
}

}  // namespace

absl::StatusOr<WireDType> ParseWireDType(absl::string_view name) {
  if (name == "float32") return WireDType::kFloat32;
  if (name == "bfloat16") return WireDType::kBFloat16;
  if (name == "float16") return WireDType::kFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown wire dtype \"", name, "\"; allowed: float32, bfloat16, float16"));
}

const char* WireDTypeName(WireDType dtype) {
  switch (dtype) {
    case WireDType::kFloat32:
      return "float32";
    case WireDType::kBFloat16:
      return "bfloat16";
    case WireDType::kFloat16:
      return "float16";
  }
  return "?";
}

absl::Status CheckScaleExponent(WireDType dtype, std::optional<int> scale_exponent) {
  if (dtype != WireDType::kFloat16) {
    if (!scale_exponent.has_value()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("a scale_exponent on a ", WireDTypeName(dtype),
                                                   " stream (only float16 values carry one)"));
  }
  if (!scale_exponent.has_value()) {
    return absl::InvalidArgumentError("no scale_exponent on a float16 stream");
  }
  if (*scale_exponent < kMinScaleExponent || *scale_exponent > kMaxScaleExponent) {
    return absl::InvalidArgumentError(absl::StrCat("scale_exponent ", *scale_exponent,
                                                   " is out of range; allowed ", kMinScaleExponent,
                                                   "..", kMaxScaleExponent));
  }
  return absl::OkStatus();
}

size_t BytesPerValue(WireDType dtype) { return dtype == WireDType::kFloat32 ? 4 : 2; }

void EncodeBFloat16(const float* in, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = BitsOf(in[i]);
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    // A NaN must not round into infinity: keep it a (quiet) NaN.
    const uint32_t nan = (bits >> 16) | 0x40u;
    out[i] = static_cast<uint16_t>((bits & kAbsMask) > kInfBits ? nan : rounded);
  }
}

void DecodeBFloat16(const uint16_t* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatOf(static_cast<uint32_t>(in[i]) << 16);
}

float Float16Scale(const float* in, int64_t n) {
  uint32_t largest = 0;  // the largest magnitude's bits: orders like the magnitudes
  for (int64_t i = 0; i < n; ++i) largest = std::max(largest, BitsOf(in[i]) & kAbsMask);
  if (largest == 0 || largest >= kInfBits) return 1.0f;
  // largest = m * 2^e with m in [1, 2) (or a subnormal): scale = 2^(14 - e).
  int e;
  std::frexp(FloatOf(largest), &e);  // largest = f * 2^e, f in [0.5, 1)
  const int shift = std::clamp(15 - e, -100, 100);
  return std::ldexp(1.0f, shift);
}

void EncodeFloat16(const float* in, int64_t n, float scale, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = HalfOf(in[i] * scale);
}

void DecodeFloat16(const uint16_t* in, int64_t n, float inverse_scale, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatOfHalf(in[i]) * inverse_scale;
}

int Float16ScaleExponent(const float* in, int64_t n) {
  int e = 0;
  std::frexp(Float16Scale(in, n), &e);  // 2^k = 0.5 * 2^(k+1)
  return e - 1;
}

namespace {

// Bytes at an odd address go through a small aligned buffer on the stack, a block at a
// time, so that the loops above always run on properly aligned uint16_t arrays.
constexpr int64_t kBlock = 1024;

inline float Pow2(int e) { return std::ldexp(1.0f, e); }

}  // namespace

void EncodeValues(WireDType dtype, const float* in, int64_t n, int scale_exponent, void* out) {
  char* dst = static_cast<char*>(out);
  if (dtype == WireDType::kFloat32) {
    std::memcpy(dst, in, n * sizeof(float));
    return;
  }
  const float scale = Pow2(scale_exponent);
  if (reinterpret_cast<uintptr_t>(dst) % alignof(uint16_t) == 0) {
    // Aligned (a fresh gRPC slice, a vector): straight into place.
    uint16_t* out16 = reinterpret_cast<uint16_t*>(dst);
    if (dtype == WireDType::kBFloat16) {
      EncodeBFloat16(in, n, out16);
    } else {
      EncodeFloat16(in, n, scale, out16);
    }
    return;
  }
  alignas(64) uint16_t block[kBlock];
  for (int64_t done = 0; done < n; done += kBlock) {
    const int64_t m = std::min(kBlock, n - done);
    if (dtype == WireDType::kBFloat16) {
      EncodeBFloat16(in + done, m, block);
    } else {
      EncodeFloat16(in + done, m, scale, block);
    }
    std::memcpy(dst + done * 2, block, m * 2);
  }
}

void DecodeValues(WireDType dtype, const void* in, int64_t n, int scale_exponent, float* out) {
  const char* src = static_cast<const char*>(in);
  if (dtype == WireDType::kFloat32) {
    std::memcpy(out, src, n * sizeof(float));
    return;
  }
  const float inverse = Pow2(-scale_exponent);
  if (reinterpret_cast<uintptr_t>(src) % alignof(uint16_t) == 0) {
    const uint16_t* in16 = reinterpret_cast<const uint16_t*>(src);
    if (dtype == WireDType::kBFloat16) {
      DecodeBFloat16(in16, n, out);
    } else {
      DecodeFloat16(in16, n, inverse, out);
    }
    return;
  }
  alignas(64) uint16_t block[kBlock];
  for (int64_t done = 0; done < n; done += kBlock) {
    const int64_t m = std::min(kBlock, n - done);
    std::memcpy(block, src + done * 2, m * 2);
    if (dtype == WireDType::kBFloat16) {
      DecodeBFloat16(block, m, out + done);
    } else {
      DecodeFloat16(block, m, inverse, out + done);
    }
  }
}

void DecodeSegments(WireDType dtype, const std::vector<absl::string_view>& segments,
                    int scale_exponent, float* out) {
  size_t bytes = 0;
  for (absl::string_view segment : segments) bytes += segment.size();
  SegmentReader(dtype, &segments, scale_exponent)
      .Read(static_cast<int64_t>(bytes / BytesPerValue(dtype)), out);
}

void SegmentReader::SkipEmpty() {
  while (segment_ < segments_->size() && at_ == (*segments_)[segment_].size()) {
    ++segment_;
    at_ = 0;
  }
}

void SegmentReader::Read(int64_t n, float* out) {
  while (n > 0) {
    SkipEmpty();
    const absl::string_view segment = (*segments_)[segment_];
    const int64_t whole = static_cast<int64_t>((segment.size() - at_) / width_);
    if (whole > 0) {
      const int64_t m = std::min(n, whole);
      DecodeValues(dtype_, segment.data() + at_, m, scale_exponent_, out);
      out += m;
      n -= m;
      at_ += static_cast<size_t>(m) * width_;
      continue;
    }
    // A value cut at the segment's end: its bytes put together, from as many segments as
    // it takes.
    char value[4];
    size_t have = 0;
    while (have < width_) {
      SkipEmpty();
      const absl::string_view part = (*segments_)[segment_];
      const size_t take = std::min(width_ - have, part.size() - at_);
      std::memcpy(value + have, part.data() + at_, take);
      have += take;
      at_ += take;
    }
    DecodeValues(dtype_, value, 1, scale_exponent_, out++);
    --n;
  }
}

void SegmentReader::Skip(int64_t n) {
  size_t bytes = static_cast<size_t>(n) * width_;
  while (bytes > 0) {
    SkipEmpty();
    const size_t take = std::min(bytes, (*segments_)[segment_].size() - at_);
    at_ += take;
    bytes -= take;
  }
}

void RoundToWire(WireDType dtype, const float* in, int64_t n, int scale_exponent, float* out) {
  if (dtype == WireDType::kFloat32) {
    if (out != in) std::memcpy(out, in, n * sizeof(float));
    return;
  }
  alignas(64) uint16_t block[kBlock];
  for (int64_t done = 0; done < n; done += kBlock) {
    const int64_t m = std::min(kBlock, n - done);
    if (dtype == WireDType::kBFloat16) {
      EncodeBFloat16(in + done, m, block);
      DecodeBFloat16(block, m, out + done);
    } else {
      EncodeFloat16(in + done, m, Pow2(scale_exponent), block);
      DecodeFloat16(block, m, Pow2(-scale_exponent), out + done);
    }
  }
}

}  // namespace p3
