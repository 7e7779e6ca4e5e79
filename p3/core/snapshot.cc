#include "p3/core/snapshot.h"

namespace p3 {

void Snapshot::Assign(const float* values, int64_t n) {
  Reserve(n);
  scale_exponent_ = dtype_ == WireDType::kFloat16 ? Float16ScaleExponent(values, n) : 0;
  EncodeValues(dtype_, values, n, scale_exponent_, storage_.data());
  size_ = n;
}

void Snapshot::Reserve(int64_t n) {
  const size_t bytes = static_cast<size_t>(n) * BytesPerValue(dtype_);
  if (storage_.size() < bytes) storage_.resize(bytes);
}

float* Snapshot::Float32Storage(int64_t n) {
  Reserve(n);
  size_ = n;
  return reinterpret_cast<float*>(storage_.data());
}

std::optional<int> Snapshot::scale_exponent() const {
  if (dtype_ != WireDType::kFloat16) return std::nullopt;
  return scale_exponent_;
}

void Snapshot::DecodeTo(float* out) const {
  DecodeValues(dtype_, storage_.data(), size_, scale_exponent_, out);
}

std::vector<float> Snapshot::Decoded() const {
  std::vector<float> out(static_cast<size_t>(size_));
  DecodeTo(out.data());
  return out;
}

}  // namespace p3
