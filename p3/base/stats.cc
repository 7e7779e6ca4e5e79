#include "p3/base/stats.h"

#include <algorithm>
#include <cmath>

namespace p3 {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t n = values.size();
  std::nth_element(values.begin(), values.begin() + n / 2, values.end());
  const double upper = values[n / 2];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + n / 2);
  return 0.5 * (lower + upper);
}

StreamingMedian::StreamingMedian(double relative_resolution)
    : log_step_(std::log1p(relative_resolution > 0 ? relative_resolution : 1e-3)) {}

void StreamingMedian::Add(double value) {
  ++count_;
  if (!(value > 0) || !std::isfinite(value)) {
    ++zeros_;
    return;
  }
  const double clamped = std::min(kMaxValue, std::max(kMinValue, value));
  const int64_t bucket = static_cast<int64_t>(std::floor(std::log(clamped) / log_step_));
  if (counts_.empty()) {
    first_bucket_ = bucket;
    counts_.assign(1, 0);
  }
  const int64_t size = static_cast<int64_t>(counts_.size());
  if (bucket < first_bucket_ || bucket >= first_bucket_ + size) {
    // Grow by at least the current span (and 64) on the side that is short: the array is
    // reallocated a logarithmic number of times.
    const int64_t slack = std::max<int64_t>(64, size);
    const int64_t first = bucket < first_bucket_ ? bucket - slack : first_bucket_;
    const int64_t end = bucket >= first_bucket_ + size ? bucket + 1 + slack : first_bucket_ + size;
    std::vector<int64_t> grown(static_cast<size_t>(end - first), 0);
    std::copy(counts_.begin(), counts_.end(), grown.begin() + (first_bucket_ - first));
    counts_.swap(grown);
    first_bucket_ = first;
  }
  ++counts_[static_cast<size_t>(bucket - first_bucket_)];
}

double StreamingMedian::Centre(int64_t bucket) const {
  return std::exp((static_cast<double>(bucket) + 0.5) * log_step_);
}

double StreamingMedian::Median() const {
  if (count_ == 0) return 0;
  // The values of rank count_ / 2 (upper middle) and, for an even count, count_ / 2 - 1;
  // the zeros rank first.
  const int64_t upper_rank = count_ / 2;
  const int64_t lower_rank = count_ % 2 == 1 ? upper_rank : upper_rank - 1;
  double lower = 0;
  if (upper_rank < zeros_) return 0;
  int64_t seen = zeros_;
  for (size_t i = 0; i < counts_.size(); ++i) {
    const int64_t n = counts_[i];
    if (n == 0) continue;
    const double centre = Centre(first_bucket_ + static_cast<int64_t>(i));
    if (lower_rank >= seen && lower_rank < seen + n) lower = centre;
    if (upper_rank < seen + n) return 0.5 * (lower + centre);
    seen += n;
  }
  return lower;  // not reached: upper_rank < count_
}

}  // namespace p3
