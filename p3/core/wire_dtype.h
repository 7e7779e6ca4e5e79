// 16-bit encodings of float32 values for the wire (scheduling.wire_dtype), without any
// transport: bfloat16 and IEEE float16, converted in bulk with round-to-nearest-even.
//
// bfloat16 keeps float32's exponent (range) and 8 bits of mantissa: no scaling is needed.
// float16 keeps 11 bits of mantissa but only 5 of exponent (normal numbers from 6.1e-5 to
// 65504), so a block of values is multiplied by a power of two first (Float16Scale): the
// largest magnitude lands in [2^14, 2^15), nothing overflows, and small values keep as
// much precision as the block's range allows. Powers of two scale exactly, so decoding
// with the inverse scale gives back exactly the rounded values. Infinities and NaNs are
// kept as such (scale 1), so that a diverged run is seen as one on the other side.
//
// The loops are plain per-element code without branches on the data path that GCC
// vectorises at -O3 (SSE2 and later); no F16C instructions are assumed.
//
// Example:
//   std::vector<uint16_t> wire(n);
//   const float scale = Float16Scale(grad, n);
//   EncodeFloat16(grad, n, scale, wire.data());       // sender
//   DecodeFloat16(wire.data(), n, 1.0f / scale, out);  // receiver
#ifndef P3_P3_CORE_WIRE_DTYPE_H_
#define P3_P3_CORE_WIRE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace p3 {

enum class WireDType { kFloat32, kBFloat16, kFloat16 };

// "float32", "bfloat16", "float16"; anything else is refused, listing those.
absl::StatusOr<WireDType> ParseWireDType(absl::string_view name);
const char* WireDTypeName(WireDType dtype);
// 4 or 2.
size_t BytesPerValue(WireDType dtype);

// bfloat16: the upper half of float32, rounded to nearest even; NaN stays NaN.
void EncodeBFloat16(const float* in, int64_t n, uint16_t* out);
void DecodeBFloat16(const uint16_t* in, int64_t n, float* out);

// The power of two to multiply `in` by before EncodeFloat16: the largest finite
// magnitude then lies in [2^14, 2^15). 1 when all values are zero or any is infinite or
// NaN. Bounded to [2^-100, 2^100].
float Float16Scale(const float* in, int64_t n);
// IEEE float16 of in[i] * scale, rounded to nearest even (subnormals included); values
// beyond float16's range become infinities.
void EncodeFloat16(const float* in, int64_t n, float scale, uint16_t* out);
// out[i] = float(in[i]) * inverse_scale.
void DecodeFloat16(const uint16_t* in, int64_t n, float inverse_scale, float* out);

// --- One message's values, as the transports use them (docs/protocol.md, "16-bit wire").
// A float16 message carries the exponent e of its scale 2^e (SliceData.scale_exponent);
// these bound it, so that 2^e and 2^-e are normal float32 numbers.
inline constexpr int kMinScaleExponent = -100;
inline constexpr int kMaxScaleExponent = 100;

// The one check of a message's scale_exponent against the stream's dtype: it must be
// there, within [kMinScaleExponent, kMaxScaleExponent], exactly on a float16 stream.
// InvalidArgument otherwise, with a message the caller prefixes with what the values
// are ("gradient of slice 3: no scale_exponent on a float16 stream").
absl::Status CheckScaleExponent(WireDType dtype, std::optional<int> scale_exponent);

// The exponent of Float16Scale(in, n): what a sender of these values puts in the message.
int Float16ScaleExponent(const float* in, int64_t n);

// Encodes n values into `out` (n * BytesPerValue(dtype) bytes, little-endian, any
// alignment): float32 copied, bfloat16, or float16 times 2^scale_exponent (ignored for
// the other dtypes).
void EncodeValues(WireDType dtype, const float* in, int64_t n, int scale_exponent, void* out);

// Decodes n values from `in` (any alignment) into `out`, inverting EncodeValues exactly.
void DecodeValues(WireDType dtype, const void* in, int64_t n, int scale_exponent, float* out);

// The same for values cut at arbitrary byte positions into `segments` (a received
// message's buffers), whose sizes add up to n * BytesPerValue(dtype): a value split
// between two segments is put together first.
void DecodeSegments(WireDType dtype, const std::vector<absl::string_view>& segments,
                    int scale_exponent, float* out);

// DecodeSegments a few values at a time: reads the values of `segments` in order, each
// call decoding the next ones into the caller's buffer, so that a pass that works block
// by block (the server's sum and update) takes its values straight from a received
// message's buffers instead of from a whole decoded copy. A value cut between two
// segments is put together on its own (4 bytes; 2 on a 16-bit wire). DecodeSegments is
// this reader reading every value at once.
//
// Not thread-safe; `segments` must outlive the reader and stay unchanged.
class SegmentReader {
 public:
  SegmentReader(WireDType dtype, const std::vector<absl::string_view>* segments,
                int scale_exponent)
      : dtype_(dtype), width_(BytesPerValue(dtype)), segments_(segments),
        scale_exponent_(scale_exponent) {}

  // Decodes the next n values into `out`; the segments must hold them.
  void Read(int64_t n, float* out);
  // Passes over the next n values.
  void Skip(int64_t n);

 private:
  // Moves to the next segment while the current one is used up.
  void SkipEmpty();

  const WireDType dtype_;
  const size_t width_;
  const std::vector<absl::string_view>* const segments_;
  const int scale_exponent_;
  size_t segment_ = 0;  // the current segment
  size_t at_ = 0;       // the next byte in it
};

// out[i] = the value a receiver decodes after in[i] went over the wire: EncodeValues then
// DecodeValues, without a buffer in between (shared memory applies the wire's rounding
// this way). `in` and `out` may be the same array.
void RoundToWire(WireDType dtype, const float* in, int64_t n, int scale_exponent, float* out);

}  // namespace p3

#endif  // P3_P3_CORE_WIRE_DTYPE_H_
