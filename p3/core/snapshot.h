// One version of a slice's values as they go on the wire, whatever the wire's dtype:
// float32 values as they are, or their bfloat16 / float16 encoding (float16 scaled by a
// power of two chosen over the slice, p3/core/wire_dtype.h). A server encodes each new
// version once and sends the same Snapshot to every worker; the gRPC slices that carry
// its bytes keep it alive until they are sent.
//
// Example (the shard, once per version; a writer, for each worker):
//   auto next = std::make_shared<Snapshot>(WireDType::kFloat16);
//   next->Assign(params.data(), n);                   // encoded once
//   header.scale_exponent = next->scale_exponent();   // present on float16 only
//   Write(next->bytes(), /*keepalive=*/next);         // the bytes, not a copy
//   next->DecodeTo(worker_params);                    // a colocated worker's values
//
// Thread-compatible: written by its owner while nobody else holds it (the shard reuses a
// snapshot's storage only when it holds the last reference), then read from any thread.
#ifndef P3_P3_CORE_SNAPSHOT_H_
#define P3_P3_CORE_SNAPSHOT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "p3/core/wire_dtype.h"

namespace p3 {

class Snapshot {
 public:
  explicit Snapshot(WireDType dtype) : dtype_(dtype) {}

  // Makes this the wire encoding of values[0, n): float32 copied, bfloat16 rounded,
  // float16 scaled with Float16ScaleExponent(values, n) and rounded. Reuses the storage:
  // allocates only when n values need more than it has.
  void Assign(const float* values, int64_t n);

  // Storage for n values, so that the first Assign of up to n values allocates nothing.
  void Reserve(int64_t n);

  // A float32 snapshot only: makes this n values long and returns where they go, for a
  // caller that writes them itself (the optimizer, in its pass over the values) instead
  // of Assign copying them afterwards. Valid until the next Assign or Float32Storage.
  float* Float32Storage(int64_t n);

  WireDType dtype() const { return dtype_; }
  // Number of values.
  int64_t size() const { return size_; }
  // The values' bytes as they go on the wire: size() * BytesPerValue(dtype()),
  // little-endian. Valid until the next Assign.
  absl::string_view bytes() const {
    return absl::string_view(storage_.data(), static_cast<size_t>(size_) * BytesPerValue(dtype_));
  }
  // The exponent e of the scale 2^e the values were multiplied by, as SliceData carries
  // it: present on a float16 wire only.
  std::optional<int> scale_exponent() const;

  // The float32 values a receiver decodes from bytes() (on a 16-bit wire, the values
  // rounded; float32: the values themselves, bit for bit) into out[0, size()).
  void DecodeTo(float* out) const;
  std::vector<float> Decoded() const;

  // Bytes of storage held (for memory accounting).
  int64_t capacity_bytes() const { return static_cast<int64_t>(storage_.capacity()); }

 private:
  WireDType dtype_;
  int scale_exponent_ = 0;  // float16 only
  int64_t size_ = 0;
  // Aligned as operator new aligns, so that 16-bit values convert on the aligned path.
  std::vector<char> storage_;
};

}  // namespace p3

#endif  // P3_P3_CORE_SNAPSHOT_H_
